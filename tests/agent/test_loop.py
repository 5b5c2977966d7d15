from __future__ import annotations

import json
from typing import Any

import pytest

from toolkeeper import Keeper, Principal
from toolkeeper.agent import Agent, ModelRequest, RunStatus
from toolkeeper.core.errors import ConfigurationError, ErrorCode
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import MemoryStore
from toolkeeper.policy.budgets import Budgets
from toolkeeper.testing import ScriptedModel, scripted_call

pytestmark = pytest.mark.anyio

ALICE = Principal(id="alice", grants=frozenset({"docs:*"}))


def make_keeper() -> tuple[Keeper, list[str]]:
    keeper = Keeper(ledger=MemoryStore())
    published: list[str] = []

    @keeper.tool(effect="read_only", permissions=["docs:read"])
    def search(query: str) -> list[str]:
        """Search the documents."""
        return [f"doc about {query}"]

    @keeper.tool(effect="destructive", permissions=["docs:publish"])
    def publish(title: str) -> str:
        """Publish a report."""
        published.append(title)
        return f"published {title}"

    @keeper.tool(effect="read_only", permissions=["admin:read"])
    def secrets() -> str:
        """Not for alice."""
        return "s3cret"

    return keeper, published


def last_tool_message(request: ModelRequest) -> dict[str, Any]:
    return dict(request.messages[-1])


async def test_a_run_calls_tools_then_answers_with_three_verdicts() -> None:
    keeper, _ = make_keeper()
    model = ScriptedModel([scripted_call("search", query="tides"), "Tides are tidal."])
    agent = Agent(keeper, model, verify=lambda r: "tidal" in (r.output or ""))
    async with keeper:
        result = await agent.run("tell me about tides", principal=ALICE)
    assert result.status is RunStatus.COMPLETED
    assert result.output == "Tides are tidal."
    assert [o.result.data for o in result.calls] == [["doc about tides"]]
    assert result.calls[0].call.principal == ALICE
    assert (result.verdicts.protocol, result.verdicts.tools, result.verdicts.task) == (
        True,
        True,
        True,
    )
    assert result.usage.requests == 2
    tool_message = result.messages[2]
    assert tool_message["role"] == "tool" and "doc about tides" in tool_message["content"]


async def test_the_model_sees_only_what_the_principal_may_use_and_cannot_call_more() -> None:
    keeper, _ = make_keeper()
    model = ScriptedModel([scripted_call("secrets"), "ok"])
    async with keeper:
        result = await Agent(keeper, model).run("x", principal=ALICE)
    offered = {t["function"]["name"] for t in model.requests[0].tools}
    assert offered == {"search", "publish"}
    assert result.calls[0].result.error is not None
    assert result.calls[0].result.error.code in (
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.UNKNOWN_TOOL,
    )
    assert result.verdicts.protocol is False


async def test_a_call_needing_approval_pauses_and_a_resume_runs_it_exactly_once() -> None:
    keeper, published = make_keeper()
    model = ScriptedModel([scripted_call("publish", title="Tides"), "Published."])
    agent = Agent(keeper, model)
    async with keeper:
        paused = await agent.run("publish", principal=ALICE)
        assert paused.status is RunStatus.AWAITING_APPROVAL and len(paused.approvals) == 1
        assert published == []
        still = await agent.resume(paused.run_id)
        assert still.status is RunStatus.AWAITING_APPROVAL and published == []
        await keeper.approvals.approve(paused.approvals[0], by="bob")
        done = await agent.resume(paused.run_id)
        again = await agent.resume(paused.run_id)
    assert done.status is RunStatus.COMPLETED and done.output == "Published."
    assert published == ["Tides"]
    assert again.status is RunStatus.COMPLETED and again.output == "Published."
    assert [o.result.status for o in again.calls] == [CallStatus.SUCCEEDED]
    assert len(model.requests) == 2  # the paused turn is not asked again


async def test_a_denial_goes_back_to_the_model_as_the_coded_refusal() -> None:
    keeper, published = make_keeper()
    seen: list[dict[str, Any]] = []

    def answer(request: ModelRequest) -> str:
        seen.append(last_tool_message(request))
        return "I could not publish."

    model = ScriptedModel([scripted_call("publish", title="Tides"), answer])
    agent = Agent(keeper, model)
    async with keeper:
        paused = await agent.run("publish", principal=ALICE)
        await keeper.approvals.deny(paused.approvals[0], by="bob", reason="not today")
        done = await agent.resume(paused.run_id)
    assert published == []
    assert done.status is RunStatus.COMPLETED
    assert json.loads(seen[0]["content"])["error"]["code"] == "APPROVAL_DENIED"
    assert done.verdicts.tools is True and done.verdicts.protocol is True


async def test_a_run_that_never_answers_stops_at_max_steps() -> None:
    keeper, _ = make_keeper()
    model = ScriptedModel([scripted_call("search", query=str(i)) for i in range(10)])
    async with keeper:
        result = await Agent(keeper, model, max_steps=3).run("loop", principal=ALICE)
    assert result.status is RunStatus.MAX_STEPS
    assert len(result.calls) == 3 and result.output is None
    assert result.verdicts.protocol is False


async def test_a_large_result_is_shown_as_a_head_and_read_on_with_read_result() -> None:
    keeper = Keeper(ledger=MemoryStore())

    @keeper.tool(effect="read_only")
    def dump() -> str:
        """A huge document."""
        return "".join(f"{i:06d}" for i in range(20_000))  # 120,000 characters

    pieces: list[str] = []

    def read_on(request: ModelRequest) -> Any:
        pieces.append(str(last_tool_message(request)["content"]))
        assert "read_result" in {t["function"]["name"] for t in request.tools}
        return scripted_call("read_result", ref="call_0_0", offset=6000, length=12)

    def finish(request: ModelRequest) -> str:
        pieces.append(str(last_tool_message(request)["content"]))
        return "done"

    model = ScriptedModel([scripted_call("dump"), read_on, finish], context_window=10_000)
    agent = Agent(keeper, model, result_share=0.1)
    who = Principal(id="p", grants=frozenset({"*"}))
    async with keeper:
        result = await agent.run("read", principal=who)
        record = await keeper.store.get_call(result.run_id, "call_0_0")
    assert agent.max_result_chars == 4000
    assert pieces[0].startswith("000000000001") and "120,000 characters" in pieces[0]
    assert len(pieces[0]) < 4300
    assert pieces[1].startswith("001000001001")
    assert record is not None and len(record.result) == 120_000
    assert result.calls[0].result.data == record.result


async def test_read_result_reads_nothing_of_another_run() -> None:
    keeper = Keeper(ledger=MemoryStore())

    @keeper.tool(effect="read_only")
    def note() -> str:
        """A note."""
        return "private"

    who = Principal(id="p", grants=frozenset({"*"}))
    async with keeper:
        await Agent(keeper, ScriptedModel([scripted_call("note"), "ok"])).run(
            "a", principal=who, task_id="run-a"
        )
        other = await Agent(
            keeper, ScriptedModel([scripted_call("read_result", ref="call_0_0"), "ok"])
        ).run("b", principal=who, task_id="run-b")
    refused = other.calls[0].result
    assert refused.error is not None and "private" not in json.dumps(refused.error.to_dict())


async def test_an_unknown_model_string_and_bad_settings_are_refused() -> None:
    keeper, _ = make_keeper()
    with pytest.raises(ConfigurationError):
        Agent(keeper, "nope:model")
    with pytest.raises(ConfigurationError):
        Agent(keeper, ScriptedModel([]), max_steps=0)


async def test_another_tool_named_read_result_is_not_replaced() -> None:
    keeper, _ = make_keeper()

    @keeper.tool(name="read_result")
    def mine() -> str:
        return ""

    with pytest.raises(ConfigurationError):
        Agent(keeper, ScriptedModel([]))


async def test_text_streams_to_the_caller_as_it_comes() -> None:
    keeper, _ = make_keeper()
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    async with keeper:
        result = await Agent(keeper, ScriptedModel(["one two three"])).run(
            "x", principal=ALICE, on_text=on_text
        )
    assert len(pieces) == 3 and "".join(pieces) == result.output == "one two three"


async def test_a_call_to_a_tool_the_turn_lacked_makes_the_next_turn_select_it() -> None:
    keeper = Keeper(ledger=MemoryStore())
    for topic in ("weather", "stocks", "news", "sports", "recipes", "traffic"):

        def lookup(query: str, topic: str = topic) -> str:
            return f"{topic}: {query}"

        keeper.add_function(
            lookup,
            name=f"{topic}.lookup",
            effect="read_only",
            description=f"Look up {topic} information.",
        )

    @keeper.tool(effect="read_only")
    def convert_currency(amount: float, to: str) -> str:
        """Convert an amount of money into another currency."""
        return f"{amount} {to}"

    offered: list[set[str]] = []

    def record(turn: Any) -> Any:
        def play(request: ModelRequest) -> Any:
            offered.append({t["function"]["name"] for t in request.tools})
            return turn

        return play

    model = ScriptedModel(
        [
            record(scripted_call("currency_convert", amount=3, to="EUR")),
            record(scripted_call("convert_currency", amount=3, to="EUR")),
            record("3 EUR"),
        ]
    )
    who = Principal(id="p", grants=frozenset({"*"}))
    async with keeper:
        result = await Agent(keeper, model, select_k=2).run(
            "what is the weather in Paris", principal=who
        )
    assert "convert_currency" not in offered[0]
    assert result.calls[0].result.error is not None
    assert result.calls[0].result.error.code is ErrorCode.UNKNOWN_TOOL
    assert "convert_currency" in offered[1]
    assert result.calls[1].result.data == "3 EUR"
    assert result.status is RunStatus.COMPLETED and result.verdicts.protocol is False


async def test_a_run_out_of_budget_fails_with_the_code() -> None:
    keeper = Keeper(ledger=MemoryStore(), budgets=Budgets(max_calls_per_task=2))

    @keeper.tool(effect="read_only")
    def ping(n: int) -> int:
        """Ping."""
        return n

    model = ScriptedModel([scripted_call("ping", n=i) for i in range(5)])
    who = Principal(id="p", grants=frozenset({"*"}))
    async with keeper:
        result = await Agent(keeper, model).run("x", principal=who)
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith("BUDGET_EXCEEDED")
    assert [o.result.ok for o in result.calls] == [True, True, False]


async def test_a_failing_tool_and_a_failed_check_are_told_apart_from_the_protocol() -> None:
    keeper = Keeper(ledger=MemoryStore())

    @keeper.tool(effect="read_only")
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    model = ScriptedModel([scripted_call("broken"), "I tried."])
    who = Principal(id="p", grants=frozenset({"*"}))
    agent = Agent(keeper, model, verify=lambda r: "the report was not written")
    async with keeper:
        result = await agent.run("x", principal=who)
    assert result.status is RunStatus.COMPLETED
    assert (result.verdicts.protocol, result.verdicts.tools, result.verdicts.task) == (
        True,
        False,
        False,
    )
    assert result.verdicts.task_note == "the report was not written"
    assert "boom" not in json.dumps([dict(m) for m in result.messages])


async def test_resuming_an_ended_run_reports_its_refusals_and_proposes_nothing() -> None:
    keeper, _ = make_keeper()
    model = ScriptedModel([scripted_call("secrets"), scripted_call("search", query="x"), "ok"])
    agent = Agent(keeper, model)
    async with keeper:
        first = await agent.run("x", principal=ALICE)
        again = await agent.resume(first.run_id)
    assert [o.result.status for o in again.calls] == [o.result.status for o in first.calls]
    refused = again.calls[0].result.error
    assert refused is not None and refused.code is first.calls[0].result.error.code  # type: ignore[union-attr]
    assert len(model.requests) == 3


async def test_run_stream_yields_the_text_then_holds_the_result() -> None:
    keeper, _ = make_keeper()
    model = ScriptedModel([scripted_call("search", query="x"), "found it here"])
    pieces: list[str] = []
    async with keeper:
        async with Agent(keeper, model).run_stream("x", principal=ALICE) as stream:
            async for text in stream:
                pieces.append(text)
        assert stream.result is not None
    assert pieces == ["found ", "it ", "here"] and stream.result.output == "found it here"


async def test_a_stream_left_early_still_runs_to_its_end() -> None:
    keeper, _ = make_keeper()
    model = ScriptedModel(["one two", scripted_call("search", query="x")])
    async with keeper, Agent(keeper, model).run_stream("x", principal=ALICE) as stream:
        async for _ in stream:
            break
    assert stream.result is not None and stream.result.status is RunStatus.COMPLETED


def test_run_sync_runs_a_script_without_an_event_loop() -> None:
    keeper, _ = make_keeper()
    agent = Agent(keeper, ScriptedModel([scripted_call("search", query="x"), "done"]))
    try:
        result = agent.run_sync("x", principal=ALICE)
    finally:
        keeper.close_sync()
    assert result.status is RunStatus.COMPLETED and result.calls[0].result.ok


async def test_with_discovery_the_model_finds_its_tool_and_call_tool_pauses_for_approval() -> None:
    keeper, published = make_keeper()
    who = Principal(id="alice", grants=frozenset({"docs:*", "tools:call"}))
    found: list[str] = []

    def after_search(request: ModelRequest) -> Any:
        found.append(str(last_tool_message(request)["content"]))
        return scripted_call("call_tool", name="publish", arguments={"title": "Tides"})

    model = ScriptedModel(
        [scripted_call("search_tools", query="publish a report"), after_search, "Published."]
    )
    agent = Agent(keeper, model, discovery=True)
    async with keeper:
        paused = await agent.run("publish the tides report", principal=who)
        assert paused.status is RunStatus.AWAITING_APPROVAL and published == []
        await keeper.approvals.approve(paused.approvals[0], by="bob")
        done = await agent.resume(paused.run_id)
        again = await agent.resume(paused.run_id)
    offered = {t["function"]["name"] for t in model.requests[0].tools}
    assert offered == {"search_tools", "get_tool_details", "call_tool"}
    assert "publish" in found[0] and "secrets" not in found[0]
    assert done.status is again.status is RunStatus.COMPLETED
    assert published == ["Tides"]
