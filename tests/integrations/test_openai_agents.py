"""An OpenAI Agents SDK agent runs the keeper's tools through `keeper.execute`, driven by the
SDK's own offline `agents.testing.ScriptedModel`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, RunState
from agents.exceptions import ModelBehaviorError
from agents.testing import ScriptedModel, assistant_message, function_call

from toolkeeper import CallStatus, ErrorCode
from toolkeeper.integrations import RunScope
from toolkeeper.integrations.openai_agents import KeeperTools

from .shop import ALICE, BOB, Shop, proposed_at_once, shop

pytestmark = pytest.mark.anyio

SCOPE = RunScope(principal=ALICE, task_id="t1")
QUIET = RunConfig(tracing_disabled=True)
DONE = [assistant_message("done")]


@pytest.fixture
async def shop_() -> AsyncIterator[Shop]:
    out = shop()
    async with out.keeper:
        yield out


def outputs(model: ScriptedModel) -> dict[str, str]:
    """The tool outputs the model was sent, by call id."""
    return {
        item["call_id"]: item["output"]
        for call in model.calls
        if isinstance(call.input, list)
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def code(output: str) -> str:
    return str(json.loads(output)["error"]["code"])


async def run(shop_: Shop, *steps: Any, context: Any = SCOPE) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(steps)
    agent = Agent(name="shop", model=model, tools=KeeperTools(shop_.keeper).tools)
    result = await Runner.run(agent, "hi", context=context, run_config=QUIET)
    return result, model


async def test_the_model_sees_only_its_principals_tools_with_model_visible_fields(
    shop_: Shop,
) -> None:
    _, model = await run(shop_, DONE)
    [call] = model.calls
    assert [t.name for t in call.tools] == ["orders_get", "orders_refund"]
    get = call.tools[0]
    assert getattr(get, "params_json_schema") == dict(  # noqa: B009
        shop_.keeper.catalog.get("orders.get").spec.input_schema
    )
    assert "permissions" not in json.dumps(getattr(get, "params_json_schema"))  # noqa: B009


async def test_a_read_runs_once_and_is_recorded(shop_: Shop) -> None:
    result, model = await run(
        shop_, [function_call("orders_get", {"order_id": "A1"}, call_id="c1")], DONE
    )
    assert result.final_output == "done"
    assert shop_.runs["orders.get"] == 1
    assert json.loads(outputs(model)["c1"]) == {"order_id": "A1", "total": 42}
    record = await shop_.keeper.store.get_call("t1", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED
    assert record.principal_id == "alice"


async def test_a_write_needing_approval_interrupts_then_runs_once_approved(shop_: Shop) -> None:
    tools = KeeperTools(shop_.keeper)
    refund = function_call("orders_refund", {"order_id": "A1", "amount": 5}, call_id="c1")
    model = ScriptedModel([[refund], DONE])
    agent = Agent(name="shop", model=model, tools=tools.tools)
    first = await Runner.run(agent, "refund", context=SCOPE, run_config=QUIET)
    [item] = first.interruptions
    assert item.tool_name == "orders_refund"
    assert shop_.runs["orders.refund"] == 0

    state = first.to_state()
    [waiting] = await tools.resolve(state, scope=SCOPE)  # undecided: still waiting
    assert waiting.raw_item == item.raw_item
    [request] = await shop_.keeper.approvals.pending()
    await shop_.keeper.approvals.approve(request.id, by="bob")
    assert await tools.resolve(state, scope=SCOPE) == []
    second = await Runner.run(agent, state, run_config=QUIET)
    assert second.final_output == "done"
    assert shop_.runs["orders.refund"] == 1
    assert outputs(model)["c1"] == "refunded 5 on A1"

    # The model proposing the same call id again is answered from the ledger.
    _, again = await run(shop_, [refund], DONE)
    assert outputs(again)["c1"] == "refunded 5 on A1"
    assert shop_.runs["orders.refund"] == 1


async def test_a_denied_call_reaches_the_model_as_the_coded_refusal(shop_: Shop) -> None:
    tools = KeeperTools(shop_.keeper)
    refund = function_call("orders_refund", {"order_id": "A1", "amount": 5}, call_id="c1")
    model = ScriptedModel([[refund], DONE])
    agent = Agent(name="shop", model=model, tools=tools.tools)
    first = await Runner.run(agent, "refund", context=SCOPE, run_config=QUIET)
    [request] = await shop_.keeper.approvals.pending()
    await shop_.keeper.approvals.deny(request.id, by="bob", reason="not this one")
    state = first.to_state()
    assert await tools.resolve(state, scope=SCOPE) == []
    await Runner.run(agent, state, run_config=QUIET)
    assert code(outputs(model)["c1"]) == ErrorCode.APPROVAL_DENIED
    assert shop_.runs["orders.refund"] == 0


async def test_bad_arguments_reach_the_model_as_the_coded_refusal(shop_: Shop) -> None:
    tools = KeeperTools(shop_.keeper)
    model = ScriptedModel(
        [
            [
                function_call("orders_get", {"order_id": 7}, call_id="c1"),
                function_call("orders_get", "{not json", call_id="c2"),
            ],
            DONE,
        ]
    )
    agent = Agent(name="shop", model=model, tools=tools.tools)
    first = await Runner.run(agent, "total?", context=SCOPE, run_config=QUIET)
    # The SDK holds a call whose arguments it cannot parse; the keeper never saw it, so
    # `resolve` lets it through and the keeper refuses it.
    assert [i.raw_item.call_id for i in first.interruptions] == ["c2"]  # type: ignore[union-attr]
    state = first.to_state()
    assert await tools.resolve(state, scope=SCOPE) == []
    await Runner.run(agent, state, run_config=QUIET)
    seen = outputs(model)
    assert [code(seen["c1"]), code(seen["c2"])] == [ErrorCode.INVALID_ARGUMENTS] * 2
    assert "Traceback" not in seen["c2"]
    assert shop_.runs["orders.get"] == 0


async def test_a_tool_the_principal_may_not_see_is_not_run(shop_: Shop) -> None:
    # The SDK refuses a call to a tool it did not enable for the run, before the keeper.
    with pytest.raises(ModelBehaviorError):
        await run(shop_, [function_call("admin_wipe", {}, call_id="c1")], DONE)
    assert shop_.runs["admin.wipe"] == 0
    assert await shop_.keeper.store.get_call("t1", "c1") is None


async def test_the_same_call_id_replayed_is_not_run_twice(shop_: Shop) -> None:
    for _ in range(2):
        step = [function_call("orders_get", {"order_id": "A1"}, call_id="c1")]
        _, model = await run(shop_, step, DONE)
        assert json.loads(outputs(model)["c1"])["total"] == 42
    assert shop_.runs["orders.get"] == 1


async def test_concurrent_runs_on_one_keeper_each_act_for_their_own_principal(
    shop_: Shop,
) -> None:
    seen: dict[int, ScriptedModel] = {}

    async def one(i: int) -> None:
        step = [function_call("orders_get", {"order_id": f"A{i}"}, call_id="c1")]
        scope = RunScope(principal=ALICE if i % 2 else BOB, task_id=f"t{i}")
        _, seen[i] = await run(shop_, step, DONE, context=scope)

    await proposed_at_once(shop_, 10, one, inside=10)  # all ten in the tool at once
    assert shop_.runs["orders.get"] == 10
    for i, model in seen.items():
        assert json.loads(outputs(model)["c1"])["order_id"] == f"A{i}"
        record = await shop_.keeper.store.get_call(f"t{i}", "c1")
        assert record is not None and record.principal_id == ("alice" if i % 2 else "bob")


async def test_the_same_call_from_concurrent_runs_runs_once(shop_: Shop) -> None:
    seen: list[ScriptedModel] = []

    async def one(i: int) -> None:
        step = [function_call("orders_get", {"order_id": "A1"}, call_id="c1")]
        seen.append((await run(shop_, step, DONE))[1])

    await proposed_at_once(shop_, 5, one, inside=1)
    assert shop_.runs["orders.get"] == 1
    assert [json.loads(outputs(m)["c1"])["total"] for m in seen] == [42] * 5


def _saved(scope: Any) -> dict[str, Any]:
    return {"principal": scope.principal.id, "task_id": scope.task_id}


def _restored(saved: Any) -> RunScope:
    # The application maps the saved identity back to its principal (here: alice only).
    assert saved["principal"] == ALICE.id
    return RunScope(principal=ALICE, task_id=saved["task_id"])


async def test_an_interrupted_run_continues_after_a_restart_on_a_sqlite_ledger(
    tmp_path: Path,
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    refund = function_call("orders_refund", {"order_id": "A1", "amount": 5}, call_id="c1")
    before = shop(ledger)
    async with before.keeper:
        model = ScriptedModel([[refund]])
        agent = Agent(name="shop", model=model, tools=KeeperTools(before.keeper).tools)
        first = await Runner.run(agent, "refund", context=SCOPE, run_config=QUIET)
        saved = first.to_state().to_string(context_serializer=_saved)

    after = shop(ledger)  # a new process: the same tools on the same ledger
    async with after.keeper:
        [request] = await after.keeper.approvals.pending()
        await after.keeper.approvals.approve(request.id, by="bob")
        tools = KeeperTools(after.keeper)
        model = ScriptedModel([DONE])
        agent = Agent(name="shop", model=model, tools=tools.tools)
        state = await RunState.from_string(agent, saved, context_deserializer=_restored)
        assert await tools.resolve(state, scope=SCOPE) == []
        second = await Runner.run(agent, state, run_config=QUIET)
    assert second.final_output == "done"
    assert outputs(model)["c1"] == "refunded 5 on A1"
    assert before.runs["orders.refund"] + after.runs["orders.refund"] == 1


async def test_tools_built_for_a_principal_are_only_theirs(shop_: Shop) -> None:
    assert [t.name for t in KeeperTools(shop_.keeper, principal=BOB).tools] == ["orders_get"]
    assert len(KeeperTools(shop_.keeper).tools) == 3  # each enabled per run


async def test_two_calls_needing_approval_in_one_turn_both_interrupt(shop_: Shop) -> None:
    tools = KeeperTools(shop_.keeper)
    both = [
        function_call("orders_refund", {"order_id": "A1", "amount": 5}, call_id="c1"),
        function_call("orders_refund", {"order_id": "A2", "amount": 7}, call_id="c2"),
    ]
    model = ScriptedModel([both, DONE])
    agent = Agent(name="shop", model=model, tools=tools.tools)
    first = await Runner.run(agent, "refund both", context=SCOPE, run_config=QUIET)
    assert len(first.interruptions) == 2
    state = first.to_state()
    for request in await shop_.keeper.approvals.pending():
        if request.call_id == "c1":
            await shop_.keeper.approvals.approve(request.id, by="bob")
        else:
            await shop_.keeper.approvals.deny(request.id, by="bob", reason="too much")
    assert await tools.resolve(state, scope=SCOPE) == []
    await Runner.run(agent, state, run_config=QUIET)
    seen = outputs(model)
    assert seen["c1"] == "refunded 5 on A1"
    assert code(seen["c2"]) == ErrorCode.APPROVAL_DENIED
    assert shop_.runs["orders.refund"] == 1
