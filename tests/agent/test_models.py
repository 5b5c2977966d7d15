"""Model strings build the vendor's client from its own environment variables."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from toolkeeper.agent import (
    Agent,
    AnthropicModel,
    GeminiModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    resolve_model,
)
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.testing import Reply

from .vendors import ALICE, keeper_with_tools, serving

pytestmark = pytest.mark.anyio


async def close(client: Any) -> None:
    aio = getattr(client, "aio", None)
    if aio is not None:
        await aio.aclose()
        client.close()
    else:
        await client.close()


async def test_openai_string_uses_openai_base_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    keeper, _ = keeper_with_tools()
    answer = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
    with serving([Reply(body=answer)]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        agent = Agent(keeper, "openai:gpt-local")
        async with keeper:
            result = await agent.run("hello", principal=ALICE)
        await close(agent.model.client)  # type: ignore[attr-defined]
    assert result.output == "hi"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert server.requests[0].body["model"] == "gpt-local"


@pytest.mark.parametrize(
    ("spec", "kind", "env"),
    [
        ("openai-responses:m", OpenAIResponsesModel, {"OPENAI_API_KEY": "k"}),
        ("anthropic:m", AnthropicModel, {"ANTHROPIC_API_KEY": "k"}),
        ("gemini:m", GeminiModel, {"GEMINI_API_KEY": "k"}),
        ("openai:m", OpenAIChatModel, {"OPENAI_API_KEY": "k"}),
    ],
)
async def test_each_provider_string_builds_its_adapter(
    monkeypatch: pytest.MonkeyPatch, spec: str, kind: type, env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    model = resolve_model(spec)
    assert isinstance(model, kind) and model.name == "m"  # type: ignore[attr-defined]
    await close(model.client)  # type: ignore[attr-defined]


def test_a_string_without_a_known_provider_is_refused() -> None:
    for spec in ("gpt-4", "mistral:m", "openai:"):
        with pytest.raises(ConfigurationError):
            resolve_model(spec)


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError, match=r"toolkeeper\[anthropic\]"):
        resolve_model("anthropic:m")
