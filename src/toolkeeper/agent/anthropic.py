"""Anthropic models through the official `anthropic` SDK (Messages API): `AnthropicModel`.

Needs the `[anthropic]` extra. Built from a string (`"anthropic:NAME"`), the client takes its
settings from the environment as the SDK does (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`), with
its own retries off: the agent's retry policy decides. Overload (529, or an `overloaded_error`
event in a stream) and rate limits are retryable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._sdk import as_json, require, status_error
from .model import ModelRequest, ModelResponse, Usage

__all__ = ["AnthropicModel"]

_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}
"""The status an error event inside a stream stands for (the stream itself answered 200)."""


def _translated(exc: Exception) -> Exception:
    anthropic = require("anthropic", "anthropic")
    if isinstance(exc, anthropic.APITimeoutError):
        return status_error("Anthropic", 408)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        body = exc.body if isinstance(exc.body, Mapping) else {}
        kind = (body.get("error") or {}).get("type") if isinstance(body, Mapping) else None
        if status < 400 and kind in _ERROR_STATUS:
            status = _ERROR_STATUS[kind]
        return status_error("Anthropic", status, exc.response)
    if isinstance(exc, anthropic.APIConnectionError):
        return status_error("Anthropic", None)
    return exc


class AnthropicModel:
    """A Claude model through the Messages API.

    Args:
        name: The model's name (`claude-sonnet-4-5`, ...).
        client: An `anthropic.AsyncAnthropic`; by default one built from the environment.
        context_window: Tokens the model reads at most.
        max_tokens: The most tokens one answer may take (the API requires it).
        settings: More request fields (`temperature`, `thinking`, ...).
    """

    dialect = "anthropic"

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        context_window: int = 200_000,
        max_tokens: int = 4096,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.client = client or require("anthropic", "anthropic").AsyncAnthropic(max_retries=0)
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.settings = dict(settings or {})

    def user_message(self, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": list(results)}]

    async def request(self, request: ModelRequest) -> ModelResponse:
        fields: dict[str, Any] = {
            "model": self.name,
            "max_tokens": self.max_tokens,
            "messages": list(request.messages),
            **self.settings,
        }
        if request.instructions:
            fields["system"] = request.instructions
        if request.tools:
            fields["tools"] = list(request.tools)
            fields.update(request.tool_choice)
        try:
            if request.on_text is None:
                raw = as_json(await self.client.messages.create(**fields))
            else:
                async with self.client.messages.stream(**fields) as stream:
                    async for event in stream:
                        if event.type == "text" and event.text:
                            await request.on_text(event.text)
                    raw = as_json(await stream.get_final_message())
        except Exception as exc:
            raise _translated(exc) from exc
        content = [dict(block) for block in raw.get("content") or ()]
        usage = raw.get("usage") or {}
        return ModelResponse(
            raw=raw,
            messages=[{"role": "assistant", "content": content}],
            text="".join(b.get("text") or "" for b in content if b.get("type") == "text"),
            turn=raw.get("id"),
            usage=Usage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
            ),
        )
