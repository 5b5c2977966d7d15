"""A pydantic-ai agent runs the keeper's tools through `keeper.execute`, driven by
pydantic-ai's own offline `FunctionModel`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

pytest.importorskip("pydantic_ai")

from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDefinition,
)

from toolkeeper import CallStatus, ErrorCode, Principal
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.integrations import RunScope
from toolkeeper.integrations.pydantic_ai import KeeperToolset

from .shop import ALICE, BOB, Shop, proposed_at_once, shop

pytestmark = pytest.mark.anyio

SCOPE = RunScope(principal=ALICE, task_id="t1")


class Script:
    """A `FunctionModel` that answers with the given responses in turn and keeps what it was
    shown: the tools of each turn and the tool returns it read."""

    def __init__(self, *turns: ModelResponse) -> None:
        self.turns = list(turns)
        self.tools: list[list[ToolDefinition]] = []
        self.returns: dict[str, ToolReturnPart] = {}
        self.model = FunctionModel(self._answer)

    def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools.append(list(info.function_tools))
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        self.returns[part.tool_call_id] = part
        return self.turns.pop(0)

    def error_code(self, call_id: str) -> str:
        part = self.returns[call_id]
        assert part.outcome == "failed"
        return str(json.loads(str(part.content))["error"]["code"])


def calls(*parts: tuple[str, Any, str]) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(name, args, tool_call_id=call_id) for name, args, call_id in parts]
    )


DONE = ModelResponse(parts=[TextPart("done")])


@pytest.fixture
async def shop_() -> AsyncIterator[Shop]:
    out = shop()
    async with out.keeper:
        yield out


def agent(shop_: Shop) -> Agent[Any, str | DeferredToolRequests]:
    return Agent(toolsets=[KeeperToolset(shop_.keeper)], output_type=[str, DeferredToolRequests])


async def test_the_model_sees_only_its_principals_tools_with_model_visible_fields(
    shop_: Shop,
) -> None:
    script = Script(DONE)
    await agent(shop_).run("hi", model=script.model, deps=SCOPE)
    [tools] = script.tools
    assert [t.name for t in tools] == ["orders_get", "orders_refund"]
    get = tools[0]
    assert get.description.startswith("Look an order up by id.")
    assert get.parameters_json_schema == shop_.keeper.catalog.get("orders.get").spec.input_schema
    assert "permissions" not in json.dumps([t.parameters_json_schema for t in tools])


async def test_a_read_runs_once_and_is_recorded(shop_: Shop) -> None:
    script = Script(calls(("orders_get", {"order_id": "A1"}, "c1")), DONE)
    result = await agent(shop_).run("total?", model=script.model, deps=SCOPE)
    assert result.output == "done"
    assert shop_.runs["orders.get"] == 1
    assert json.loads(str(script.returns["c1"].content)) == {"order_id": "A1", "total": 42}
    record = await shop_.keeper.store.get_call("t1", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED
    assert record.principal_id == "alice"


async def test_a_write_needing_approval_defers_then_runs_once_approved(shop_: Shop) -> None:
    toolset = KeeperToolset(shop_.keeper)
    runner = Agent(toolsets=[toolset], output_type=[str, DeferredToolRequests])
    refund = calls(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    first = await runner.run("refund", model=Script(refund).model, deps=SCOPE)
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    assert [c.tool_call_id for c in requests.approvals] == ["c1"]
    assert shop_.runs["orders.refund"] == 0
    approval_id = requests.metadata["c1"]["approval_id"]

    undecided = await toolset.decisions(requests)
    assert undecided.approvals == {}

    await shop_.keeper.approvals.approve(approval_id, by="bob")
    decided = await toolset.decisions(requests)
    script = Script(DONE)
    second = await runner.run(
        model=script.model,
        message_history=first.all_messages(),
        deferred_tool_results=decided,
        deps=SCOPE,
    )
    assert second.output == "done"
    assert shop_.runs["orders.refund"] == 1
    assert script.returns["c1"].content == "refunded 5 on A1"

    # The same continuation sent again (a client retry) runs nothing twice.
    again = Script(DONE)
    await runner.run(
        model=again.model,
        message_history=first.all_messages(),
        deferred_tool_results=decided,
        deps=SCOPE,
    )
    assert shop_.runs["orders.refund"] == 1
    assert again.returns["c1"].content == "refunded 5 on A1"


async def test_a_denied_call_reaches_the_model_as_the_coded_refusal(shop_: Shop) -> None:
    toolset = KeeperToolset(shop_.keeper)
    runner = Agent(toolsets=[toolset], output_type=[str, DeferredToolRequests])
    refund = calls(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    first = await runner.run("refund", model=Script(refund).model, deps=SCOPE)
    assert isinstance(first.output, DeferredToolRequests)
    await shop_.keeper.approvals.deny(
        first.output.metadata["c1"]["approval_id"], by="bob", reason="not this one"
    )
    script = Script(DONE)
    await runner.run(
        model=script.model,
        message_history=first.all_messages(),
        deferred_tool_results=await toolset.decisions(first.output),
        deps=SCOPE,
    )
    assert script.error_code("c1") == ErrorCode.APPROVAL_DENIED
    assert shop_.runs["orders.refund"] == 0


async def test_bad_arguments_reach_the_model_as_the_coded_refusal(shop_: Shop) -> None:
    script = Script(
        calls(
            ("orders_get", {"order_id": 7}, "c1"),
            ("orders_get", "{not json", "c2"),
            ("orders_get", "[1, 2]", "c3"),
        ),
        DONE,
    )
    await agent(shop_).run("total?", model=script.model, deps=SCOPE)
    assert [script.error_code(c) for c in ("c1", "c2", "c3")] == [ErrorCode.INVALID_ARGUMENTS] * 3
    assert shop_.runs["orders.get"] == 0
    assert "Traceback" not in str(script.returns["c2"].content)
    record = await shop_.keeper.store.get_call("t1", "c2")
    assert record is not None and record.status is CallStatus.REJECTED


async def test_a_tool_the_principal_may_not_see_is_refused(shop_: Shop) -> None:
    script = Script(calls(("admin_wipe", {}, "c1")), DONE)
    await agent(shop_).run("wipe", model=script.model, deps=SCOPE)
    assert shop_.runs["admin.wipe"] == 0
    assert "admin_wipe" not in [t.name for t in script.tools[0]]


async def test_a_call_for_a_tool_listed_to_someone_else_is_refused_by_the_keeper(
    shop_: Shop,
) -> None:
    # The tools were listed for an admin; the call acts for alice, who may not wipe.
    admin = Principal(id="root", grants=frozenset({"*"}))
    scopes = iter([RunScope(principal=admin, task_id="t1"), SCOPE])
    toolset = KeeperToolset(shop_.keeper, scope=lambda ctx: next(scopes, SCOPE))
    script = Script(calls(("admin_wipe", {}, "c1")), DONE)
    runner = Agent(toolsets=[toolset], output_type=[str, DeferredToolRequests])
    await runner.run("wipe", model=script.model)
    assert script.error_code("c1") == ErrorCode.UNKNOWN_TOOL
    assert shop_.runs["admin.wipe"] == 0


async def test_the_same_call_id_replayed_is_not_run_twice(shop_: Shop) -> None:
    for _ in range(2):
        script = Script(calls(("orders_get", {"order_id": "A1"}, "c1")), DONE)
        await agent(shop_).run("total?", model=script.model, deps=SCOPE)
        assert json.loads(str(script.returns["c1"].content))["total"] == 42
    assert shop_.runs["orders.get"] == 1


async def test_a_run_naming_no_principal_acts_for_the_keepers_default_one() -> None:
    own = shop(principal=ALICE)
    async with own.keeper:
        script = Script(calls(("orders_get", {"order_id": "A1"}, "c1")), DONE)
        toolset = KeeperToolset(own.keeper, scope=RunScope(task_id="t1"))
        await Agent(toolsets=[toolset]).run("total?", model=script.model)
        record = await own.keeper.store.get_call("t1", "c1")
    assert own.runs["orders.get"] == 1
    assert record is not None and record.principal_id == "alice"


async def test_a_run_naming_no_principal_on_a_keeper_without_one_is_refused() -> None:
    nobody = shop()
    async with nobody.keeper:
        script = Script(calls(("orders_get", {"order_id": "A1"}, "c1")), DONE)
        toolset = KeeperToolset(nobody.keeper, scope=RunScope(task_id="t1"))
        with pytest.raises(ConfigurationError):
            await Agent(toolsets=[toolset]).run("total?", model=script.model)
        assert nobody.runs["orders.get"] == 0


async def test_concurrent_runs_on_one_keeper_each_act_for_their_own_principal(
    shop_: Shop,
) -> None:
    seen: dict[int, Script] = {}

    async def one(i: int) -> None:
        script = seen[i] = Script(calls(("orders_get", {"order_id": f"A{i}"}, "c1")), DONE)
        scope = RunScope(principal=ALICE if i % 2 else BOB, task_id=f"t{i}")
        await agent(shop_).run("total?", model=script.model, deps=scope)

    await proposed_at_once(shop_, 10, one, inside=10)  # all ten in the tool at once
    assert shop_.runs["orders.get"] == 10
    for i, script in seen.items():
        assert json.loads(str(script.returns["c1"].content))["order_id"] == f"A{i}"
        record = await shop_.keeper.store.get_call(f"t{i}", "c1")
        assert record is not None and record.principal_id == ("alice" if i % 2 else "bob")


async def test_the_same_call_from_concurrent_runs_runs_once(shop_: Shop) -> None:
    seen: list[Script] = []

    async def one(i: int) -> None:
        script = Script(calls(("orders_get", {"order_id": "A1"}, "c1")), DONE)
        seen.append(script)
        await agent(shop_).run("total?", model=script.model, deps=SCOPE)

    await proposed_at_once(shop_, 5, one, inside=1)
    assert shop_.runs["orders.get"] == 1
    assert [json.loads(str(s.returns["c1"].content))["total"] for s in seen] == [42] * 5


async def test_a_paused_run_continues_after_a_restart_on_a_sqlite_ledger(
    tmp_path: Path,
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    refund = calls(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    before = shop(ledger)
    async with before.keeper:
        first = await agent(before).run("refund", model=Script(refund).model, deps=SCOPE)
        assert isinstance(first.output, DeferredToolRequests)
        history = ModelMessagesTypeAdapter.dump_json(first.all_messages())
        requests = TypeAdapter(DeferredToolRequests).dump_json(first.output)

    after = shop(ledger)  # a new process: the same tools on the same ledger
    async with after.keeper:
        waiting = TypeAdapter(DeferredToolRequests).validate_json(requests)
        await after.keeper.approvals.approve(waiting.metadata["c1"]["approval_id"], by="bob")
        toolset = KeeperToolset(after.keeper)
        script = Script(DONE)
        await Agent(toolsets=[toolset], output_type=[str, DeferredToolRequests]).run(
            model=script.model,
            message_history=ModelMessagesTypeAdapter.validate_json(history),
            deferred_tool_results=await toolset.decisions(waiting),
            deps=SCOPE,
        )
    assert script.returns["c1"].content == "refunded 5 on A1"
    assert before.runs["orders.refund"] + after.runs["orders.refund"] == 1


async def test_an_approval_cannot_be_stretched_to_arguments_changed_on_the_way(
    shop_: Shop,
) -> None:
    # pydantic-ai lets the application override the arguments of an approved call; the
    # keeper's approval is bound to the arguments the person saw, so the call is refused.
    toolset = KeeperToolset(shop_.keeper)
    runner = Agent(toolsets=[toolset], output_type=[str, DeferredToolRequests])
    refund = calls(("orders_refund", {"order_id": "A1", "amount": 5}, "c1"))
    first = await runner.run("refund", model=Script(refund).model, deps=SCOPE)
    assert isinstance(first.output, DeferredToolRequests)
    await shop_.keeper.approvals.approve(first.output.metadata["c1"]["approval_id"], by="bob")
    stretched = DeferredToolResults(
        approvals={"c1": ToolApproved(override_args={"order_id": "A1", "amount": 500_000})}
    )
    script = Script(DONE)
    await runner.run(
        model=script.model,
        message_history=first.all_messages(),
        deferred_tool_results=stretched,
        deps=SCOPE,
    )
    assert script.error_code("c1") == ErrorCode.CALL_ID_CONFLICT
    assert shop_.runs["orders.refund"] == 0


async def test_calls_of_a_tool_that_declares_what_it_writes_do_not_overlap(shop_: Shop) -> None:
    inside, most = 0, 0

    @shop_.keeper.tool(
        name="stock.set", effect="write", permissions=["orders:write"], writes=lambda a: a["sku"]
    )
    async def set_stock(sku: str, count: int) -> int:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        inside -= 1
        return count

    script = Script(
        calls(
            ("stock_set", {"sku": "s1", "count": 1}, "c1"),
            ("stock_set", {"sku": "s1", "count": 2}, "c2"),
            ("orders_get", {"order_id": "A1"}, "c3"),
        ),
        DONE,
    )
    await agent(shop_).run("stock", model=script.model, deps=SCOPE)
    assert [script.returns[c].content for c in ("c1", "c2")] == ["1", "2"]
    assert most == 1


async def test_two_calls_needing_approval_in_one_step_are_both_deferred(shop_: Shop) -> None:
    toolset = KeeperToolset(shop_.keeper)
    runner = Agent(toolsets=[toolset], output_type=[str, DeferredToolRequests])
    both = calls(
        ("orders_refund", {"order_id": "A1", "amount": 5}, "c1"),
        ("orders_refund", {"order_id": "A2", "amount": 7}, "c2"),
    )
    first = await runner.run("refund both", model=Script(both).model, deps=SCOPE)
    assert isinstance(first.output, DeferredToolRequests)
    assert sorted(c.tool_call_id for c in first.output.approvals) == ["c1", "c2"]
    await shop_.keeper.approvals.approve(first.output.metadata["c1"]["approval_id"], by="bob")
    await shop_.keeper.approvals.deny(
        first.output.metadata["c2"]["approval_id"], by="bob", reason="too much"
    )
    script = Script(DONE)
    await runner.run(
        model=script.model,
        message_history=first.all_messages(),
        deferred_tool_results=await toolset.decisions(first.output),
        deps=SCOPE,
    )
    assert script.returns["c1"].content == "refunded 5 on A1"
    assert script.error_code("c2") == ErrorCode.APPROVAL_DENIED
    assert shop_.runs["orders.refund"] == 1


async def test_pydantic_ais_test_model_calls_the_exported_tools_with_valid_arguments(
    shop_: Shop,
) -> None:
    # TestModel makes up arguments from each tool's exported JSON Schema.
    model = TestModel(call_tools=["orders_get"])
    result = await agent(shop_).run("total?", model=model, deps=SCOPE)
    assert shop_.runs["orders.get"] == 1
    returned = json.loads(str(result.output))["orders_get"]
    assert json.loads(returned)["total"] == 42
