"""`ScriptedModel`: a model that plays a list of turns, for tests of agents built on
`toolkeeper.agent.Agent` (no network, no SDK).

Each turn is a final answer (text), or the calls to propose (`scripted_call(name, **args)`),
or a function of the request that returns one of those. It speaks the OpenAI Chat Completions
format (its dialect is `openai_chat`), and it picks its turn from the conversation it is given
(the number of assistant messages in it), not from a counter: the same script answers a run
resumed in another process where the run stands. `completion(messages)` gives the same answer
as a `chat.completion` JSON body, and `chunks(messages)` as the `chat.completion.chunk`s of a
stream, for a local server the real `openai` client talks to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent.model import ModelRequest, ModelResponse, Usage

__all__ = ["ScriptedCall", "ScriptedModel", "scripted_call"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedCall:
    """One call a scripted turn proposes."""

    name: str
    """The tool's name, as exported."""
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    """Its arguments (text is sent as it is: malformed JSON to test refusals)."""


def scripted_call(name: str, /, **arguments: Any) -> ScriptedCall:
    """A scripted call of tool `name` with `arguments`."""
    return ScriptedCall(name=name, arguments=arguments)


Turn = str | ScriptedCall | Sequence[ScriptedCall] | Callable[[ModelRequest], Any]
"""One scripted turn: an answer, a call, calls, or a function of the request giving one."""


class ScriptedModel:
    """Plays `turns` in order; past the last, answers `"(end of script)"`.

    Args:
        turns: Each a final answer, one call, a list of calls (proposed together), or a
            function of the `ModelRequest` returning one of those.
        context_window: Tokens it claims to read (sizes the results it is shown).
    """

    dialect = "openai_chat"

    def __init__(self, turns: Sequence[Turn], *, context_window: int = 128_000) -> None:
        self.turns = list(turns)
        self.context_window = context_window
        self.requests: list[ModelRequest] = []
        """Every request it was asked, in order."""

    def user_message(self, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(results)

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        raw = self.completion(request.messages, request)
        message = raw["choices"][0]["message"]
        text = message.get("content") or ""
        if text and request.on_text is not None:
            words = text.split(" ")
            for position, word in enumerate(words):
                await request.on_text(word if position == len(words) - 1 else word + " ")
        return ModelResponse(
            raw=raw, messages=[message], text=text, turn=raw["id"], usage=Usage(output_tokens=1)
        )

    def completion(
        self, messages: Sequence[Mapping[str, Any]], request: ModelRequest | None = None
    ) -> dict[str, Any]:
        """The `chat.completion` answering a conversation: the turn after its last
        assistant message."""
        index = sum(1 for m in messages if m.get("role") == "assistant")
        turn: Any = self.turns[index] if index < len(self.turns) else "(end of script)"
        if callable(turn):
            turn = turn(request or ModelRequest(messages=messages, tools=(), instructions=None))
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(turn, str):
            message["content"] = turn
        else:
            calls = [turn] if isinstance(turn, ScriptedCall) else list(turn)
            message["tool_calls"] = [
                {
                    "id": f"call_{index}_{position}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments),
                    },
                }
                for position, call in enumerate(calls)
            ]
        return {
            "id": f"chatcmpl-scripted-{index}",
            "object": "chat.completion",
            "created": 0,
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1},
        }

    def chunks(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The answer to a conversation as a stream sends it: `chat.completion.chunk`s (its
        text word by word, each tool call as its name then its arguments in two pieces)."""
        whole = self.completion(messages)
        message = whole["choices"][0]["message"]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        text = message.get("content") or ""
        words = text.split(" ")
        deltas += [
            {"content": w if i == len(words) - 1 else w + " "} for i, w in enumerate(words) if text
        ]
        for index, call in enumerate(message.get("tool_calls") or ()):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            head = {"name": call["function"]["name"], "arguments": arguments[:half]}
            deltas.append(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": head}
                    ]
                }
            )
            deltas.append(
                {"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}
            )
        finish = whole["choices"][0]["finish_reason"]
        base = {k: whole[k] for k in ("id", "created", "model")}
        out = [
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            for delta in deltas
        ]
        out.append(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            }
        )
        return out
