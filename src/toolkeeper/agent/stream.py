"""Streamed model answers put back together: text handed on as it comes, tool-call deltas
assembled into whole calls, the result the same JSON a non-streamed request returns (what the
dialect's `parse` reads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ChatAssembly", "GeminiAssembly"]


class ChatAssembly:
    """OpenAI Chat Completions `chat.completion.chunk`s into one `chat.completion`.

    Each tool call arrives as deltas keyed by `index`: the first carries its id and name, the
    others pieces of its argument JSON, concatenated here in order.
    """

    def __init__(self) -> None:
        self.id: str | None = None
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Mapping[str, Any] | None = None

    def add(self, chunk: Mapping[str, Any]) -> str:
        """Take one chunk; the text it adds (empty when none)."""
        self.id = self.id or chunk.get("id")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta") or {}
        for piece in delta.get("tool_calls") or ():
            call = self.calls.setdefault(
                int(piece.get("index", len(self.calls))),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = piece.get("id") or call["id"]
            function = piece.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""
        text = delta.get("content") or ""
        if text:
            self.text.append(text)
        return str(text)

    def completion(self) -> dict[str, Any]:
        """The whole `chat.completion` the chunks made."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        out: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        }
        if self.usage is not None:
            out["usage"] = dict(self.usage)
        return out


class GeminiAssembly:
    """Gemini `streamGenerateContent` chunks into one response: text parts joined, each
    function call part kept whole (Gemini streams a call in one part), the last chunk's id and
    usage."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.response_id: str | None = None
        self.usage: Mapping[str, Any] | None = None

    def add(self, chunk: Mapping[str, Any]) -> str:
        """Take one chunk; the text it adds."""
        self.response_id = chunk.get("responseId") or self.response_id
        self.usage = chunk.get("usageMetadata") or self.usage
        added = []
        for candidate in (chunk.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or ():
                text = part.get("text")
                last = self.parts[-1] if self.parts else None
                plain_text = isinstance(text, str) and set(part) == {"text"}
                if plain_text and last is not None and set(last) == {"text"}:
                    last["text"] += text
                else:
                    self.parts.append(dict(part))
                if isinstance(text, str) and not part.get("thought"):
                    added.append(text)
        return "".join(added)

    def response(self) -> dict[str, Any]:
        """The whole response the chunks made."""
        out: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": self.parts}}],
        }
        if self.response_id is not None:
            out["responseId"] = self.response_id
        if self.usage is not None:
            out["usageMetadata"] = dict(self.usage)
        return out
