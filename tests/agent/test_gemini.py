"""The Gemini adapter, with the real `google-genai` client against a local server answering
with the documented generateContent payloads and its SSE stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from google import genai
from google.genai import types

from toolkeeper.agent import Agent, GeminiModel, RunStatus
from toolkeeper.dialects import ToolChoice
from toolkeeper.testing import Reply, VendorServer

from .vendors import ALICE, keeper_with_tools, serving, sse

pytestmark = pytest.mark.anyio


def generated(parts: list[dict[str, Any]], id: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 12,
            "candidatesTokenCount": 4,
            "totalTokenCount": 16,
        },
        "modelVersion": "gemini-test",
        "responseId": id,
    }


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    clients: list[genai.Client] = []

    def make(server: VendorServer) -> genai.Client:
        client = genai.Client(
            api_key="gm-test", http_options=types.HttpOptions(base_url=server.url)
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aio.aclose()
        client.close()


async def test_parallel_function_calls_run_and_their_responses_go_back_by_name(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    calls = [
        {"functionCall": {"name": "search", "args": {"query": "a"}}},
        {"functionCall": {"name": "search", "args": {"query": "b"}}},
    ]
    replies = [
        Reply(body=generated(calls, "r1")),
        Reply(body=generated([{"text": "Found."}], "r2")),
    ]
    with serving(replies) as server:
        model = GeminiModel("gemini-test", client=client_for(server))
        agent = Agent(
            keeper, model, instructions="Be brief.", tool_choice=ToolChoice(mode="required")
        )
        async with keeper:
            result = await agent.run("find", principal=ALICE)
    assert result.status is RunStatus.COMPLETED and result.output == "Found."
    assert [o.result.data for o in result.calls] == [["doc about a"], ["doc about b"]]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (24, 8)
    first, second = (r.body for r in server.requests)
    assert server.requests[0].path.endswith("/models/gemini-test:generateContent")
    declared = first["tools"][0]["functionDeclarations"]
    assert {d["name"] for d in declared} == {"search", "publish"}
    assert first["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"
    assert first["systemInstruction"]["parts"][0]["text"] == "Be brief."
    answered = second["contents"][-1]
    assert answered["role"] == "user"
    assert [p["functionResponse"]["name"] for p in answered["parts"]] == ["search", "search"]
    assert answered["parts"][0]["functionResponse"]["response"] == {"output": ["doc about a"]}


async def test_a_streamed_answer_hands_on_text_and_keeps_the_function_call(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    streamed = sse(
        (None, generated([{"text": "Let me "}], "rs")),
        (None, generated([{"text": "look."}], "rs")),
        (None, generated([{"functionCall": {"name": "search", "args": {"query": "x"}}}], "rs")),
    )
    answer = sse((None, generated([{"text": "Done."}], "rt")))
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    with serving([streamed, answer]) as server:
        model = GeminiModel("gemini-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model).run("find", principal=ALICE, on_text=on_text)
    assert pieces == ["Let me ", "look.", "Done."]
    assert result.calls[0].result.data == ["doc about x"]
    assert "streamGenerateContent" in server.requests[0].path
    sent = server.requests[1].body["contents"][1]["parts"]
    assert sent[0] == {"text": "Let me look."}


async def test_resource_exhausted_is_retried(client_for: Any) -> None:
    keeper, _ = keeper_with_tools()
    exhausted = Reply(
        status=429,
        body={
            "error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}
        },
    )
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with serving([exhausted, Reply(body=generated([{"text": "ok"}], "r"))]) as server:
        model = GeminiModel("gemini-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model, sleep=sleep).run("x", principal=ALICE)
    assert result.output == "ok" and len(waits) == 1 and len(server.requests) == 2
