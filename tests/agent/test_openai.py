"""The OpenAI adapters, with the real `openai` client against a local server answering with
the documented Chat Completions and Responses payloads."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI

from toolkeeper.agent import Agent, OpenAIChatModel, OpenAIResponsesModel, RunStatus
from toolkeeper.core.errors import ErrorCode
from toolkeeper.core.retry import RetryPolicy
from toolkeeper.dialects import ToolChoice
from toolkeeper.testing import Reply, VendorServer

from .vendors import ALICE, keeper_with_tools, serving, sse

pytestmark = pytest.mark.anyio


def completion(message: dict[str, Any], id: str = "chatcmpl-1") -> Reply:
    return Reply(
        body={
            "id": id,
            "object": "chat.completion",
            "created": 1700000000,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "refusal": None, **message},
                    "logprobs": None,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    )


def tool_call(id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    clients: list[AsyncOpenAI] = []

    def make(server: VendorServer) -> AsyncOpenAI:
        client = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_parallel_tool_calls_run_and_their_results_go_back_as_tool_messages(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    replies = [
        completion(
            {
                "tool_calls": [
                    tool_call("call_a", "search", {"query": "tides"}),
                    tool_call("call_b", "search", {"query": "moons"}),
                ]
            }
        ),
        completion({"content": "Both found."}, id="chatcmpl-2"),
    ]
    with serving(replies) as server:
        model = OpenAIChatModel("gpt-test", client=client_for(server))
        agent = Agent(keeper, model, tool_choice=ToolChoice(mode="auto", parallel=True))
        async with keeper:
            result = await agent.run("find", principal=ALICE)
    assert result.status is RunStatus.COMPLETED and result.output == "Both found."
    assert [o.result.data for o in result.calls] == [["doc about tides"], ["doc about moons"]]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (22, 14)
    first, second = (r.body for r in server.requests)
    assert server.requests[0].path == "/v1/chat/completions"
    assert {t["function"]["name"] for t in first["tools"]} == {"search", "publish"}
    assert (first["tool_choice"], first["parallel_tool_calls"]) == ("auto", True)
    sent = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in sent] == [
        ("call_a", ["doc about tides"]),
        ("call_b", ["doc about moons"]),
    ]
    assert second["messages"][1]["tool_calls"][0]["id"] == "call_a"


async def test_streamed_text_is_handed_on_and_tool_call_deltas_are_assembled(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return (
            None,
            {
                "id": "chatcmpl-s",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": "gpt-test",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    call_start = {
        "index": 0,
        "id": "call_s",
        "type": "function",
        "function": {"name": "search", "arguments": ""},
    }
    streamed = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "look."}),
        chunk({"tool_calls": [call_start]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"query"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "tides"}'}}]}),
        chunk({}, "tool_calls"),
        (None, "[DONE]"),
    )
    answer = sse(chunk({"content": "Done."}), chunk({}, "stop"), (None, "[DONE]"))
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    with serving([streamed, answer]) as server:
        agent = Agent(keeper, OpenAIChatModel("gpt-test", client=client_for(server)))
        async with keeper:
            result = await agent.run("find", principal=ALICE, on_text=on_text)
    assert pieces == ["Let me ", "look.", "Done."]
    assert result.calls[0].call.arguments == {"query": "tides"}
    assert result.calls[0].result.data == ["doc about tides"]
    assert server.requests[0].body["stream"] is True


async def test_a_rate_limit_is_retried_by_policy_after_the_retry_after_it_gave(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    limited = Reply(
        status=429,
        body={"error": {"message": "Rate limit reached", "type": "requests", "code": None}},
        headers={"retry-after": "7"},
    )
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with serving([limited, completion({"content": "ok"})]) as server:
        model = OpenAIChatModel("gpt-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model, sleep=sleep).run("x", principal=ALICE)
    assert result.status is RunStatus.COMPLETED and waits == [7.0]
    assert result.usage.requests == 2


async def test_a_model_that_keeps_failing_ends_the_run_failed_with_the_code(
    client_for: Any,
) -> None:
    keeper, published = keeper_with_tools()
    broken = Reply(status=503, body={"error": {"message": "down"}})

    async def sleep(seconds: float) -> None:
        return None

    with serving([broken]) as server:
        model = OpenAIChatModel("gpt-test", client=client_for(server))
        agent = Agent(keeper, model, sleep=sleep, retry=RetryPolicy(max_attempts=3))
        async with keeper:
            result = await agent.run("x", principal=ALICE)
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith(ErrorCode.UPSTREAM_UNAVAILABLE)
    assert len(server.requests) == 3 and published == []


async def test_a_refused_request_is_not_retried(client_for: Any) -> None:
    keeper, _ = keeper_with_tools()
    bad = Reply(status=400, body={"error": {"message": "bad request"}})
    with serving([bad]) as server:
        model = OpenAIChatModel("gpt-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model).run("x", principal=ALICE)
    assert result.status is RunStatus.FAILED and len(server.requests) == 1


def response(output: list[dict[str, Any]], id: str) -> Reply:
    return Reply(
        body={
            "id": id,
            "object": "response",
            "created_at": 1700000000,
            "status": "completed",
            "model": "gpt-test",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 5,
                "output_tokens": 3,
                "total_tokens": 8,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    )


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


async def test_responses_function_calls_run_and_go_back_as_function_call_outputs(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    replies = [
        response(
            [
                function_call("call_1", "search", {"query": "a"}),
                function_call("call_2", "search", {"query": "b"}),
            ],
            "resp_1",
        ),
        response([message("Found both.")], "resp_2"),
    ]
    with serving(replies) as server:
        model = OpenAIResponsesModel("gpt-test", client=client_for(server))
        agent = Agent(keeper, model, instructions="Be brief.")
        async with keeper:
            result = await agent.run("find", principal=ALICE)
    assert result.output == "Found both."
    assert [o.result.data for o in result.calls] == [["doc about a"], ["doc about b"]]
    first, second = (r.body for r in server.requests)
    assert server.requests[0].path == "/v1/responses"
    assert first["instructions"] == "Be brief."
    assert {t["name"] for t in first["tools"]} == {"search", "publish"}
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [(o["call_id"], json.loads(o["output"])) for o in outputs] == [
        ("call_1", ["doc about a"]),
        ("call_2", ["doc about b"]),
    ]


async def test_responses_stream_hands_on_text_and_reads_the_completed_response(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    final = response([message("Hello there.")], "resp_s").body
    events = sse(
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**final, "status": "in_progress", "output": []},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 1,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Hello ",
                "logprobs": [],
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "there.",
                "logprobs": [],
            },
        ),
        (
            "response.completed",
            {"type": "response.completed", "sequence_number": 3, "response": final},
        ),
    )
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    with serving([events]) as server:
        model = OpenAIResponsesModel("gpt-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model).run("hi", principal=ALICE, on_text=on_text)
    assert pieces == ["Hello ", "there."] and result.output == "Hello there."


async def test_strange_and_huge_tool_calls_are_refused_with_codes_and_the_run_goes_on(
    client_for: Any,
) -> None:
    keeper, published = keeper_with_tools()
    strange = completion(
        {
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": '},
                },
                tool_call("c3", "publish", {"title": "x" * 2_000_000}),
            ]
        }
    )
    with serving([strange, completion({"content": "gave up"}, id="c-2")]) as server:
        model = OpenAIChatModel("gpt-test", client=client_for(server))
        async with keeper:
            result = await Agent(keeper, model).run("x", principal=ALICE)
    codes = [o.result.error.code if o.result.error else None for o in result.calls]
    assert codes == [
        ErrorCode.UNKNOWN_TOOL,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.PAYLOAD_TOO_LARGE,
    ]
    assert result.status is RunStatus.COMPLETED and published == []
    assert result.verdicts.protocol is False
    sent = server.requests[1].body["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["c1", "c2", "c3"]


async def test_responses_tool_choice_forces_a_tool_and_turns_parallel_calls_off(
    client_for: Any,
) -> None:
    keeper, _ = keeper_with_tools()
    with serving([response([message("ok")], "resp_c")]) as server:
        model = OpenAIResponsesModel("gpt-test", client=client_for(server))
        choice = ToolChoice(mode="tool", name="search", parallel=False)
        async with keeper:
            await Agent(keeper, model, tool_choice=choice).run("x", principal=ALICE)
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "function", "name": "search"}
    assert body["parallel_tool_calls"] is False
