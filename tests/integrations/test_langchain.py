"""LangChain tools, and a LangGraph graph around them, run the keeper's tools through
`keeper.execute`, driven by LangChain's own offline `GenericFakeChatModel`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from toolkeeper import CallStatus, ErrorCode, Principal
from toolkeeper.integrations import RunScope
from toolkeeper.integrations.langchain import SCOPE_KEY, KeeperTool, keeper_tools

from .shop import ALICE, BOB, Shop, proposed_at_once, shop

pytestmark = pytest.mark.anyio

CONFIG: Any = {"configurable": {"thread_id": "t1", SCOPE_KEY: RunScope(principal=ALICE)}}


class Chat(GenericFakeChatModel):
    """LangChain's fake chat model, able to bind tools (it keeps their definitions)."""

    bound: list[dict[str, Any]] = []  # noqa: RUF012 (a pydantic field)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self


def asks(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


@pytest.fixture
async def shop_() -> AsyncIterator[Shop]:
    out = shop()
    async with out.keeper:
        yield out


def graph(
    tools: list[KeeperTool], *turns: AIMessage, checkpointer: InMemorySaver | None = None
) -> Any:
    """A LangGraph agent: the model, then its tool calls through `ToolNode`, until it
    answers."""
    model = Chat(messages=iter(turns)).bind_tools(tools)

    async def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", think)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer or InMemorySaver())


def tool_messages(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


def code(message: ToolMessage) -> str:
    assert message.status == "error"
    return str(json.loads(str(message.content))["error"]["code"])


DONE = AIMessage("done")


async def test_the_model_sees_only_its_principals_tools_with_model_visible_fields(
    shop_: Shop,
) -> None:
    tools = keeper_tools(shop_.keeper, ALICE)
    chat = Chat(messages=iter([DONE]))
    chat.bind_tools(tools)
    names = [d["function"]["name"] for d in chat.bound]
    assert names == ["orders_get", "orders_refund"]
    spec = shop_.keeper.catalog.get("orders.get").spec
    assert chat.bound[0]["function"]["parameters"] == dict(spec.input_schema)
    assert "permissions" not in json.dumps(chat.bound)


async def test_a_read_runs_once_and_is_recorded(shop_: Shop) -> None:
    agent = graph(
        keeper_tools(shop_.keeper, ALICE), asks(("orders_get", {"order_id": "A1"}, "c1")), DONE
    )
    state = await agent.ainvoke({"messages": [HumanMessage("total?")]}, CONFIG)
    message = tool_messages(state)["c1"]
    assert json.loads(str(message.content)) == {"order_id": "A1", "total": 42}
    assert message.artifact["status"] == "SUCCEEDED"
    assert shop_.runs["orders.get"] == 1
    record = await shop_.keeper.store.get_call("t1", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED
    assert record.principal_id == "alice"


async def test_a_write_needing_approval_interrupts_the_graph_then_runs_once(
    shop_: Shop,
) -> None:
    refund = asks(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    agent = graph(keeper_tools(shop_.keeper, ALICE), refund, DONE)
    paused = await agent.ainvoke({"messages": [HumanMessage("refund")]}, CONFIG)
    [interrupt] = paused["__interrupt__"]
    assert interrupt.value["error"]["code"] == ErrorCode.APPROVAL_REQUIRED
    assert shop_.runs["orders.refund"] == 0

    approval_id = interrupt.value["approval_id"]
    await shop_.keeper.approvals.approve(approval_id, by="bob")
    done = await agent.ainvoke(Command(resume=approval_id), CONFIG)
    assert tool_messages(done)["c1"].content == "refunded 5 on A1"
    assert done["messages"][-1].content == "done"
    assert shop_.runs["orders.refund"] == 1

    again = graph(keeper_tools(shop_.keeper, ALICE), refund, DONE)
    state = await again.ainvoke({"messages": [HumanMessage("refund")]}, CONFIG)
    assert tool_messages(state)["c1"].content == "refunded 5 on A1"
    assert shop_.runs["orders.refund"] == 1


async def test_a_graph_resumed_while_the_request_is_undecided_pauses_again(
    shop_: Shop,
) -> None:
    refund = asks(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    agent = graph(keeper_tools(shop_.keeper, ALICE), refund, DONE)
    paused = await agent.ainvoke({"messages": [HumanMessage("refund")]}, CONFIG)
    [first] = paused["__interrupt__"]
    again = await agent.ainvoke(Command(resume="not decided"), CONFIG)
    [second] = again["__interrupt__"]
    assert second.value["approval_id"] == first.value["approval_id"]
    assert shop_.runs["orders.refund"] == 0

    await shop_.keeper.approvals.approve(first.value["approval_id"], by="bob")
    done = await agent.ainvoke(Command(resume="approved"), CONFIG)
    assert tool_messages(done)["c1"].content == "refunded 5 on A1"
    assert shop_.runs["orders.refund"] == 1


async def test_two_calls_needing_approval_in_one_turn_each_pause_and_run_once(
    shop_: Shop,
) -> None:
    turn = asks(
        ("orders_refund", {"order_id": "A1", "amount": 5}, "c1"),
        ("orders_refund", {"order_id": "A2", "amount": 7}, "c2"),
        ("orders_get", {"order_id": "A1"}, "c3"),
    )
    agent = graph(keeper_tools(shop_.keeper, ALICE), turn, DONE)
    state = await agent.ainvoke({"messages": [HumanMessage("refund both")]}, CONFIG)
    approved: set[str] = set()
    while "__interrupt__" in state:  # a person approves what each pause shows
        for interrupt in state["__interrupt__"]:
            await shop_.keeper.approvals.approve(interrupt.value["approval_id"], by="bob")
            approved.add(interrupt.value["call_id"])
        state = await agent.ainvoke(Command(resume="approved"), CONFIG)
    assert approved == {"c1", "c2"}
    seen = tool_messages(state)
    assert [seen["c1"].content, seen["c2"].content] == ["refunded 5 on A1", "refunded 7 on A2"]
    assert shop_.runs == {"orders.refund": 2, "orders.get": 1}


async def test_a_denied_call_reaches_the_model_as_the_coded_refusal(shop_: Shop) -> None:
    refund = asks(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    agent = graph(keeper_tools(shop_.keeper, ALICE), refund, DONE)
    paused = await agent.ainvoke({"messages": [HumanMessage("refund")]}, CONFIG)
    approval_id = paused["__interrupt__"][0].value["approval_id"]
    await shop_.keeper.approvals.deny(approval_id, by="bob", reason="not this one")
    done = await agent.ainvoke(Command(resume=approval_id), CONFIG)
    assert code(tool_messages(done)["c1"]) == ErrorCode.APPROVAL_DENIED
    assert shop_.runs["orders.refund"] == 0


async def test_bad_arguments_reach_the_model_as_the_coded_refusal(shop_: Shop) -> None:
    [get, _] = keeper_tools(shop_.keeper, ALICE)
    agent = graph([get], asks(("orders_get", {"order_id": 7}, "c1")), DONE)
    state = await agent.ainvoke({"messages": [HumanMessage("total?")]}, CONFIG)
    assert code(tool_messages(state)["c1"]) == ErrorCode.INVALID_ARGUMENTS
    direct = await get.ainvoke(
        {"name": "orders_get", "args": {"order_id": ["A1"] * 3}, "id": "c2", "type": "tool_call"},
        CONFIG,
    )
    assert code(direct) == ErrorCode.INVALID_ARGUMENTS
    assert "Traceback" not in str(direct.content)
    assert shop_.runs["orders.get"] == 0


async def test_a_tool_the_principal_may_not_see_is_refused(shop_: Shop) -> None:
    admin = Principal(id="root", grants=frozenset({"*"}))
    assert "admin_wipe" not in [t.name for t in keeper_tools(shop_.keeper, ALICE)]
    # Tools built for an admin, in a run acting for alice: the keeper refuses.
    wipe = next(t for t in keeper_tools(shop_.keeper, admin) if t.name == "admin_wipe")
    agent = graph([wipe], asks(("admin_wipe", {}, "c1")), DONE)
    state = await agent.ainvoke({"messages": [HumanMessage("wipe")]}, CONFIG)
    assert code(tool_messages(state)["c1"]) == ErrorCode.UNKNOWN_TOOL
    assert shop_.runs["admin.wipe"] == 0


async def test_the_same_call_id_replayed_is_not_run_twice(shop_: Shop) -> None:
    for _ in range(2):
        tools = keeper_tools(shop_.keeper, ALICE)
        agent = graph(tools, asks(("orders_get", {"order_id": "A1"}, "c1")), DONE)
        state = await agent.ainvoke({"messages": [HumanMessage("total?")]}, CONFIG)
        assert json.loads(str(tool_messages(state)["c1"].content))["total"] == 42
    assert shop_.runs["orders.get"] == 1


async def test_outside_a_graph_a_call_needing_approval_is_answered_as_waiting(
    shop_: Shop,
) -> None:
    [_, refund] = keeper_tools(shop_.keeper, ALICE)
    call = {"name": "orders_refund", "args": {"order_id": "A1", "amount": 5}, "id": "c1"}
    message = await refund.ainvoke({**call, "type": "tool_call"}, CONFIG)
    assert code(message) == ErrorCode.APPROVAL_REQUIRED
    assert shop_.runs["orders.refund"] == 0


async def test_concurrent_runs_on_one_keeper_each_act_for_their_own_principal(
    shop_: Shop,
) -> None:
    seen: dict[int, dict[str, Any]] = {}

    async def one(i: int) -> None:
        who = ALICE if i % 2 else BOB
        agent = graph(
            keeper_tools(shop_.keeper, who), asks(("orders_get", {"order_id": f"A{i}"}, "c1")), DONE
        )
        config = {"configurable": {"thread_id": f"t{i}", SCOPE_KEY: RunScope(principal=who)}}
        seen[i] = await agent.ainvoke({"messages": [HumanMessage("total?")]}, config)

    await proposed_at_once(shop_, 10, one, inside=10)  # all ten in the tool at once
    assert shop_.runs["orders.get"] == 10
    for i, state in seen.items():
        assert json.loads(str(tool_messages(state)["c1"].content))["order_id"] == f"A{i}"
        record = await shop_.keeper.store.get_call(f"t{i}", "c1")
        assert record is not None and record.principal_id == ("alice" if i % 2 else "bob")


async def test_the_same_call_from_concurrent_runs_runs_once(shop_: Shop) -> None:
    seen: list[dict[str, Any]] = []

    async def one(i: int) -> None:
        tools = keeper_tools(shop_.keeper, ALICE)
        agent = graph(tools, asks(("orders_get", {"order_id": "A1"}, "c1")), DONE)
        seen.append(await agent.ainvoke({"messages": [HumanMessage("total?")]}, CONFIG))

    await proposed_at_once(shop_, 5, one, inside=1)
    assert shop_.runs["orders.get"] == 1
    totals = [json.loads(str(tool_messages(s)["c1"].content))["total"] for s in seen]
    assert totals == [42] * 5


async def test_a_paused_graph_continues_after_a_keeper_restart_on_a_sqlite_ledger(
    tmp_path: Path,
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    refund = asks(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    saver = InMemorySaver()  # the graph's own checkpoints (a persistent saver in production)
    before = shop(ledger)
    async with before.keeper:
        agent = graph(keeper_tools(before.keeper, ALICE), refund, checkpointer=saver)
        paused = await agent.ainvoke({"messages": [HumanMessage("refund")]}, CONFIG)
    approval_id = paused["__interrupt__"][0].value["approval_id"]

    after = shop(ledger)  # a new keeper: the same tools on the same ledger
    async with after.keeper:
        await after.keeper.approvals.approve(approval_id, by="bob")
        agent = graph(keeper_tools(after.keeper, ALICE), DONE, checkpointer=saver)
        done = await agent.ainvoke(Command(resume=approval_id), CONFIG)
    assert tool_messages(done)["c1"].content == "refunded 5 on A1"
    assert before.runs["orders.refund"] + after.runs["orders.refund"] == 1
