"""What the agent loop asks of a model: the `Model` Protocol and the values that cross it.

A model adapter speaks one vendor's API through the vendor's own SDK. It owns the shape of the
conversation (messages in the vendor's format, kept as plain JSON so a paused run can be stored)
and nothing else: the tool definitions it sends are exported by the dialect, the calls in its
answer are parsed by the dialect, and every call runs through the keeper. An adapter never runs
a tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Model", "ModelRequest", "ModelResponse", "OnText", "Usage"]

OnText = Callable[[str], Awaitable[None]]
"""Receives the model's text as it streams in, piece by piece."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens a model call (or a whole run) took."""

    input_tokens: int = 0
    """Tokens sent to the model."""
    output_tokens: int = 0
    """Tokens the model produced."""
    requests: int = 0
    """Model requests made (retries included)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
        )

    def to_dict(self) -> dict[str, int]:
        """The JSON form kept in a stored run."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "requests": self.requests,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """One turn asked of a model."""

    messages: Sequence[Mapping[str, Any]]
    """The conversation so far, in the adapter's own message format."""
    tools: Sequence[Mapping[str, Any]]
    """The turn's tool definitions, exported by the adapter's dialect."""
    tool_choice: Mapping[str, Any] = field(default_factory=dict)
    """The request fields of the turn's `ToolChoice`, exported by the dialect (`tool_choice`,
    `parallel_tool_calls`, or the vendor's equivalents)."""
    instructions: str | None = None
    """The system prompt, when there is one."""
    on_text: OnText | None = None
    """When given, the adapter streams and hands text to it as it arrives."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    """What a model answered, as the loop needs it."""

    raw: Any
    """The whole response as plain JSON: what the dialect's `parse` reads."""
    messages: Sequence[Mapping[str, Any]]
    """What to append to the conversation (the assistant's message or output items)."""
    text: str = ""
    """The text of the answer (empty when it only proposes calls)."""
    turn: str | None = None
    """The response's id, naming the turn for calls the vendor gives no id."""
    usage: Usage = field(default_factory=Usage)
    """Tokens this response took."""


@runtime_checkable
class Model(Protocol):
    """A model the agent loop can talk to (see `toolkeeper.agent.openai` and its siblings).

    Attributes:
        dialect: The `toolkeeper.dialects` name its tools and calls are in.
        context_window: Tokens the model reads at most, which sizes the results it is shown.
    """

    dialect: str
    context_window: int

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask the model for its next turn.

        Raises:
            ModelError: the model's API failed; `error.retryable` says whether to try again.
        """
        ...

    def user_message(self, text: str) -> list[dict[str, Any]]:
        """The conversation items of a user's message."""
        ...

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation items carrying a turn's results (each formatted by the dialect's
        `format_result`), in the order of the calls."""
        ...
