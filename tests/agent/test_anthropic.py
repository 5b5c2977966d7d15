"""The Anthropic adapter, with the real `anthropic` client against a local server answering
with the documented Messages payloads and streaming events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from toolkeeper.agent import Agent, AnthropicModel, RunStatus
from toolkeeper.dialects import ToolChoice
from toolkeeper.testing import Reply, VendorServer

from .vendors import ALICE, keeper_with_tools, serving, sse

pytestmark = pytest.mark.anyio


def message(content: list[dict[str, Any]], id: str, stop: str = "end_turn") -> Reply:
    return Reply(
        body={
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 9},
        }
    )


def tool_use(id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": arguments}


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    clients: list[AsyncAnthropic] = []

    def make(server: VendorServer) -> AsyncAnthropic:
        client = AsyncAnthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_parallel_tool_uses_run_and_go_back_in_one_user_message(client_for: Any) -> None:
    keeper, _ = keeper_with_tools()
    replies = [
        message(
            [
                {"type": "text", "text": "Searching."},
                tool_use("toolu_1", "search", {"query": "a"}),
                tool_use("toolu_2", "search", {"query": "b"}),
            ],
            "msg_1",
            stop="tool_use",
        ),
        message([{"type": "text", "text": "Found."}], "msg_2"),
    ]
    with serving(replies) as server:
        model = AnthropicModel("claude-test", client=client_for(server))
        choice = ToolChoice(mode="auto", parallel=False)
        agent = Agent(keeper, model, instructions="Be brief.", tool_choice=choice)
        async with keeper:
            result = await agent.run("find", principal=ALICE)
    assert result.output == "Found." and result.usage.input_tokens == 40
    assert [o.result.data for o in result.calls] == [["doc about a"], ["doc about b"]]
    first, second = (r.body for r in server.requests)
    assert server.requests[0].path == "/v1/messages"
    assert first["system"] == "Be brief." and first["max_tokens"] == 4096
    assert first["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert {t["name"] for t in first["tools"]} == {"search", "publish"}
    results = second["messages"][-1]
    assert results["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b["is_error"]) for b in results["content"]] == [
        ("tool_result", "toolu_1", False),
        ("tool_result", "toolu_2", False),
    ]


async def test_a_streamed_answer_hands_on_text_and_assembles_the_tool_use(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_s",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 1},
        },
    }
    streamed = sse(
        ("message_start", start),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Let me "},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "check."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_s",
                    "name": "search",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": '},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '"tides"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 15},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    )
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    answer = sse(
        ("message_start", start),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "Done."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    )
    with serving([streamed, answer]) as server:
        model = AnthropicModel("claude-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model).run("find", principal=ALICE, on_text=on_text)
    assert pieces[:2] == ["Let me ", "check."]
    assert result.calls[0].call.arguments == {"query": "tides"}
    assert result.calls[0].result.data == ["doc about tides"]
    assert result.output == "Done."


async def test_overload_529_is_retried_and_a_streamed_overloaded_error_too(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    replies = [
        Reply(status=529, body=overloaded),
        message([{"type": "text", "text": "ok"}], "msg_1"),
    ]
    with serving(replies) as server:
        model = AnthropicModel("claude-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model, sleep=sleep).run("x", principal=ALICE)
    assert result.status is RunStatus.COMPLETED and len(waits) == 1

    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    first = sse(
        ("message_start", {"type": "message_start", "message": {**message([], "m").body}}),
        ("error", overloaded),
    )
    replies = [
        first,
        sse(
            ("message_start", {"type": "message_start", "message": {**message([], "m").body}}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": "ok"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_stop", {"type": "message_stop"}),
        ),
    ]
    keeper, _ = keeper_with_tools()
    with serving(replies) as server:
        model = AnthropicModel("claude-test", client=client_for(server))
        async with keeper:
            agent = Agent(keeper, model, sleep=sleep)
            result = await agent.run("y", principal=ALICE, on_text=on_text)
    assert result.output == "ok"
    assert len(waits) == 2 and len(server.requests) == 2
