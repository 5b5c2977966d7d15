"""Gemini models through the official `google-genai` SDK: `GeminiModel`.

Needs the `[gemini]` extra. Built from a string (`"gemini:NAME"`), the client takes its
settings from the environment as the SDK does (`GEMINI_API_KEY` or `GOOGLE_API_KEY`,
`GOOGLE_GEMINI_BASE_URL`); the SDK retries nothing unless told to, and the agent's retry policy
decides. The SDK's automatic function calling is off: every call goes through the keeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._sdk import as_json, require, status_error
from .model import ModelRequest, ModelResponse, Usage
from .stream import GeminiAssembly

__all__ = ["GeminiModel"]


def _translated(exc: Exception) -> Exception:
    errors = require("google.genai.errors", "gemini")
    if isinstance(exc, errors.APIError):
        return status_error("Gemini", int(exc.code), getattr(exc, "response", None))
    if isinstance(exc, ConnectionError | TimeoutError):
        return status_error("Gemini", None)
    name = type(exc).__name__
    if name.endswith(("ConnectError", "ReadError", "RemoteProtocolError")):
        return status_error("Gemini", None)
    if name.endswith("Timeout") or name.endswith("TimeoutException"):
        return status_error("Gemini", 408)
    return exc


class GeminiModel:
    """A Gemini model.

    Args:
        name: The model's name (`gemini-2.5-flash`, ...).
        client: A `google.genai.Client`; by default one built from the environment.
        context_window: Tokens the model reads at most.
        settings: More `GenerateContentConfig` fields (`temperature`, ...).
    """

    dialect = "gemini"

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        context_window: int = 1_000_000,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.client = client or require("google.genai", "gemini").Client()
        self.context_window = context_window
        self.settings = dict(settings or {})

    def user_message(self, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "parts": [{"text": text}]}]

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"role": "user", "parts": list(results)}]

    async def request(self, request: ModelRequest) -> ModelResponse:
        config: dict[str, Any] = {
            "automatic_function_calling": {"disable": True},
            **self.settings,
        }
        if request.instructions:
            config["system_instruction"] = request.instructions
        if request.tools:
            config["tools"] = [{"function_declarations": list(request.tools)}]
            choice = request.tool_choice.get("toolConfig")
            if choice:
                config["tool_config"] = choice
        fields = {"model": self.name, "contents": list(request.messages), "config": config}
        models = self.client.aio.models
        try:
            if request.on_text is None:
                raw = as_json(await models.generate_content(**fields))
            else:
                assembly = GeminiAssembly()
                async for chunk in await models.generate_content_stream(**fields):
                    text = assembly.add(as_json(chunk))
                    if text:
                        await request.on_text(text)
                raw = assembly.response()
        except Exception as exc:
            raise _translated(exc) from exc
        candidate = (raw.get("candidates") or [{}])[0]
        content = dict(candidate.get("content") or {"role": "model", "parts": []})
        content.setdefault("role", "model")
        parts = content.get("parts") or []
        usage = raw.get("usageMetadata") or {}
        return ModelResponse(
            raw=raw,
            messages=[content],
            text="".join(p.get("text") or "" for p in parts if not p.get("thought")),
            turn=raw.get("responseId"),
            usage=Usage(
                input_tokens=int(usage.get("promptTokenCount") or 0),
                output_tokens=int(usage.get("candidatesTokenCount") or 0),
            ),
        )
