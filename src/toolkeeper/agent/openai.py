"""OpenAI models through the official `openai` SDK: Chat Completions (`OpenAIChatModel`) and
Responses (`OpenAIResponsesModel`). Any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
works through the client's `base_url`.

Needs the `[openai]` extra. Built from a string (`"openai:NAME"`, `"openai-responses:NAME"`),
the client takes its settings from the environment as the SDK does (`OPENAI_API_KEY`,
`OPENAI_BASE_URL`), with its own retries off: the agent's retry policy decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._sdk import as_json, require, status_error
from .model import ModelRequest, ModelResponse, Usage
from .stream import ChatAssembly

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel"]


def _client(client: Any) -> Any:
    if client is not None:
        return client
    return require("openai", "openai").AsyncOpenAI(max_retries=0)


def _translated(exc: Exception) -> Exception:
    openai = require("openai", "openai")
    if isinstance(exc, openai.APITimeoutError):
        return status_error("OpenAI", 408)
    if isinstance(exc, openai.APIStatusError):
        return status_error("OpenAI", exc.status_code, exc.response)
    if isinstance(exc, openai.APIConnectionError):
        return status_error("OpenAI", None)
    return exc


class _OpenAIModel:
    """What both OpenAI APIs' models share: the client, the settings, the user's message and
    the tool results as the messages that carry them."""

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        context_window: int = 128_000,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.client = _client(client)
        self.context_window = context_window
        self.settings = dict(settings or {})

    def user_message(self, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(results)


class OpenAIChatModel(_OpenAIModel):
    """A Chat Completions model.

    Args:
        name: The model's name (`gpt-4.1-mini`, or what the compatible server serves).
        client: An `openai.AsyncOpenAI`; by default one built from the environment.
        context_window: Tokens the model reads at most.
        settings: More request fields (`temperature`, `max_completion_tokens`, ...).
    """

    dialect = "openai_chat"

    async def request(self, request: ModelRequest) -> ModelResponse:
        messages = list(request.messages)
        if request.instructions:
            messages.insert(0, {"role": "system", "content": request.instructions})
        fields: dict[str, Any] = {"model": self.name, "messages": messages, **self.settings}
        if request.tools:
            fields["tools"] = list(request.tools)
            fields.update(request.tool_choice)
        try:
            if request.on_text is None:
                raw = as_json(await self.client.chat.completions.create(**fields))
            else:
                assembly = ChatAssembly()
                stream = await self.client.chat.completions.create(
                    **fields, stream=True, stream_options={"include_usage": True}
                )
                async for chunk in stream:
                    text = assembly.add(as_json(chunk))
                    if text:
                        await request.on_text(text)
                raw = assembly.completion()
        except Exception as exc:
            raise _translated(exc) from exc
        message = dict((raw.get("choices") or [{}])[0].get("message") or {})
        kept = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
        usage = raw.get("usage") or {}
        return ModelResponse(
            raw=raw,
            messages=[kept | {"role": "assistant"}],
            text=str(message.get("content") or ""),
            turn=raw.get("id"),
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            ),
        )


class OpenAIResponsesModel(_OpenAIModel):
    """A model through the Responses API.

    Args:
        name: The model's name.
        client: An `openai.AsyncOpenAI`; by default one built from the environment.
        context_window: Tokens the model reads at most.
        settings: More request fields (`temperature`, `reasoning`, ...).
    """

    dialect = "openai_responses"

    async def request(self, request: ModelRequest) -> ModelResponse:
        fields: dict[str, Any] = {"model": self.name, "input": list(request.messages)}
        fields.update(self.settings)
        if request.instructions:
            fields["instructions"] = request.instructions
        if request.tools:
            fields["tools"] = list(request.tools)
            fields.update(request.tool_choice)
        try:
            if request.on_text is None:
                raw = as_json(await self.client.responses.create(**fields))
            else:
                raw = await self._streamed(fields, request)
        except Exception as exc:
            raise _translated(exc) from exc
        output = [dict(item) for item in raw.get("output") or ()]
        text = "".join(
            part.get("text") or ""
            for item in output
            if item.get("type") == "message"
            for part in item.get("content") or ()
            if part.get("type") == "output_text"
        )
        usage = raw.get("usage") or {}
        return ModelResponse(
            raw=raw,
            messages=output,
            text=text,
            turn=raw.get("id"),
            usage=Usage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
            ),
        )

    async def _streamed(self, fields: dict[str, Any], request: ModelRequest) -> dict[str, Any]:
        """The `response.completed` event's response; text deltas handed on meanwhile."""
        assert request.on_text is not None
        stream = await self.client.responses.create(**fields, stream=True)
        final: dict[str, Any] | None = None
        async for event in stream:
            data = as_json(event)
            kind = data.get("type")
            if kind == "response.output_text.delta" and data.get("delta"):
                await request.on_text(str(data["delta"]))
            elif kind == "response.completed":
                final = dict(data["response"])
            elif kind in ("response.failed", "error"):
                raise status_error("OpenAI", 500)
        if final is None:
            raise status_error("OpenAI", None)
        return final
