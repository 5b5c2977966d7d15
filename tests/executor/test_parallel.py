"""Parallel batches: independent calls overlap, writes to one resource never do."""

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from toolkeeper import CallStatus, ErrorCode, Keeper, Principal, ToolCall, ToolResult
from toolkeeper.policy.budgets import Budgets

from ..conftest import APP

pytestmark = pytest.mark.anyio


async def test_independent_reads_run_concurrently(keeper: Keeper) -> None:
    both_inside = anyio.Event()
    inside = 0

    @keeper.tool(effect="read_only")
    async def read(key: str) -> str:
        nonlocal inside
        inside += 1
        if inside == 2:
            both_inside.set()
        with anyio.fail_after(5):
            await both_inside.wait()
        return key

    results = await keeper.execute_many(
        [ToolCall(call_id=f"c{i}", name="read", arguments={"key": str(i)}) for i in range(2)]
    )
    assert [r.data for r in results] == ["0", "1"]


async def test_writes_to_the_same_resource_are_serialized(keeper: Keeper) -> None:
    active: dict[str, int] = {}
    overlaps: list[str] = []
    order: list[str] = []

    @keeper.tool(effect="write", writes=lambda args: f"file:{args['path']}")
    async def write(path: str, text: str) -> str:
        active[path] = active.get(path, 0) + 1
        if active[path] > 1:
            overlaps.append(path)
        order.append(text)
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        active[path] -= 1
        return text

    calls = [
        ToolCall(call_id="a", name="write", arguments={"path": "x", "text": "1"}),
        ToolCall(call_id="b", name="write", arguments={"path": "x", "text": "2"}),
        ToolCall(call_id="c", name="write", arguments={"path": "y", "text": "3"}),
    ]
    results = await keeper.execute_many(calls)
    assert all(r.ok for r in results)
    assert overlaps == []


async def test_a_failure_in_a_batch_is_recorded_for_that_call_only(keeper: Keeper) -> None:
    @keeper.tool(effect="read_only")
    async def maybe(fail: bool) -> str:
        if fail:
            raise RuntimeError("boom")
        return "fine"

    results = await keeper.execute_many(
        [
            ToolCall(call_id="ok", name="maybe", arguments={"fail": False}),
            ToolCall(call_id="bad", name="maybe", arguments={"fail": True}),
            ToolCall(call_id="nope", name="missing", arguments={}),
        ]
    )
    assert [r.status for r in results] == [
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.REJECTED,
    ]
    assert results[1].error is not None and results[1].error.code is ErrorCode.TOOL_ERROR
    assert results[2].error is not None and results[2].error.code is ErrorCode.UNKNOWN_TOOL


async def test_one_call_id_proposed_twice_at_once_runs_once_and_counts_once() -> None:
    """Both proposals passed the gates before either was recorded: the read ran twice, the
    second was refused by the budget as another call, and the two results disagreed."""
    keeper = Keeper(principal=APP, ledger="memory://", budgets=Budgets(max_calls_per_task=1))
    runs: list[int] = []

    @keeper.tool(effect="read_only")
    async def lookup(x: int) -> int:
        runs.append(x)
        await anyio.lowlevel.checkpoint()  # lets the other proposal in
        return x

    call = ToolCall(call_id="same", name="lookup", arguments={"x": 1})
    async with keeper:
        first, second = await keeper.execute_many([call, call])
        other = await keeper.execute(ToolCall(call_id="other", name="lookup", arguments={"x": 2}))
    assert runs == [1]
    assert first.status is second.status is CallStatus.SUCCEEDED and second.replayed
    assert other.error is not None and other.error.code is ErrorCode.BUDGET_EXCEEDED


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_tasks_using_a_keeper_nobody_opened_open_it_once(
    backend: str, tmp_path: Path, pg_schema: str
) -> None:
    """Each first caller opened the ledger again: on SQLite a read ran twice for one call id
    (its first record written to a batch the next opener replaced), on PostgreSQL execute()
    raised psycopg_pool's AssertionError."""
    from toolkeeper.ledger.postgres import PostgresStore

    from ..conftest import postgres_url

    ledger: object = (
        f"sqlite:///{tmp_path / 'l.db'}"
        if backend == "sqlite"
        else PostgresStore(postgres_url(), schema=pg_schema)
    )
    keeper = Keeper(principal=APP, ledger=ledger)  # type: ignore[arg-type]
    runs: list[int] = []

    @keeper.tool(effect="read_only")
    async def lookup(n: int) -> int:
        runs.append(n)
        await anyio.lowlevel.checkpoint()
        return n

    call = ToolCall(call_id="same", name="lookup", arguments={"n": 1})
    try:
        results: list[ToolResult | None] = [None] * 8

        async def propose(i: int) -> None:
            results[i] = await keeper.execute(call)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(propose, i)
    finally:
        await keeper.aclose()
    assert runs == [1]
    assert all(r is not None and r.ok for r in results)


async def test_a_cancelled_batch_gives_back_the_resources_its_calls_hold(keeper: Keeper) -> None:
    started = anyio.Event()

    @keeper.tool(effect="write", idempotent=True, writes=lambda args: args["keys"])
    async def put(keys: list[str], hold: bool) -> str:
        if hold:
            started.set()
            await anyio.Event().wait()  # until the batch is cancelled
        return "done"

    for round_ in range(20):
        started = anyio.Event()
        async with anyio.create_task_group() as tg:
            holder = ToolCall(
                call_id=f"h{round_}", name="put", arguments={"keys": ["b"], "hold": True}
            )
            tg.start_soon(keeper.execute_many, [holder])
            await started.wait()
            # holds "a{round_}", then waits for "b" when the batch is cancelled
            waiter = ToolCall(
                call_id=f"w{round_}",
                name="put",
                arguments={"keys": [f"a{round_}", "b"], "hold": False},
            )
            tg.start_soon(keeper.execute_many, [waiter])
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()

    assert keeper.executor._resources._locks == {}
    with anyio.fail_after(5):
        [later] = await keeper.execute_many(
            [ToolCall(call_id="later", name="put", arguments={"keys": ["a0", "b"], "hold": False})]
        )
    assert later.data == "done"


async def test_a_write_to_a_tool_it_may_not_use_waits_for_no_one_elses_write(
    keeper: Keeper,
) -> None:
    """Such a call waited for the writes in flight to the tool it may not see, before it
    was refused as a call to no tool: how long it took told that the tool exists."""
    started, release = anyio.Event(), anyio.Event()

    @keeper.tool(effect="write", permissions=["orders:write"])
    async def ship(order: str) -> str:
        started.set()
        await release.wait()
        return order

    stranger = Principal(id="eve", grants=frozenset())
    answers: list[ToolResult] = []

    async def first() -> None:
        answers.extend(
            await keeper.execute_many(
                [ToolCall(call_id="a", name="ship", arguments={"order": "A"})]
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await started.wait()
        try:
            with anyio.fail_after(5):
                [refused] = await keeper.execute_many(
                    [
                        ToolCall(
                            call_id="b", name="ship", arguments={"order": "B"}, principal=stranger
                        )
                    ]
                )
        finally:
            release.set()
    assert refused.error is not None and refused.error.code is ErrorCode.UNKNOWN_TOOL
    assert [r.data for r in answers] == ["A"]
