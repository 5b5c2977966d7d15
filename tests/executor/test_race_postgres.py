"""Eight processes racing to execute the same (task_id, call_id) on PostgreSQL execute it once."""

import multiprocessing
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import CallContext, Keeper, ToolCall
from toolkeeper.ledger.base import ApprovalStatus

from ..conftest import APP, postgres_url

pytestmark = pytest.mark.postgres


def _racer(url: str, schema: str, effects: str, barrier: Any, out: Any) -> None:
    from toolkeeper.ledger.postgres import PostgresStore

    async def main() -> None:
        keeper = Keeper(principal=APP, ledger=PostgresStore(url, schema=schema))

        @keeper.tool(effect="write")
        def ship(order: str, ctx: CallContext) -> str:
            with open(effects, "a") as f:
                f.write(f"{os.getpid()} {ctx.idempotency_key}\n")
            return f"shipped {order}"

        async with keeper:
            await anyio.to_thread.run_sync(barrier.wait)
            result = await keeper.execute(
                ToolCall(call_id="c1", task_id="race", name="ship", arguments={"order": "o-1"})
            )
        out.put((result.status.value, result.data, result.replayed))

    anyio.run(main)


def test_eight_processes_execute_one_call_exactly_once(pg_schema: str, tmp_path: Path) -> None:
    url, schema = postgres_url(), pg_schema
    effects = tmp_path / "effects.txt"
    effects.touch()

    async def prepare() -> None:
        from toolkeeper.ledger.postgres import PostgresStore

        store = PostgresStore(url, schema=schema)
        await store.open()
        await store.aclose()

    anyio.run(prepare)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(url, schema, str(effects), barrier, out)) for _ in range(8)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(effects.read_text().splitlines()) == 1
    assert {(status, data) for status, data, _ in results} == {("SUCCEEDED", "shipped o-1")}
    assert sum(1 for *_, replayed in results if not replayed) == 1


@pytest.mark.anyio
async def test_keepers_racing_to_ask_for_one_approval_leave_one_pending(pg_schema: str) -> None:
    # Each proposal asks for its approval before it records the call: the losers' requests
    # are withdrawn, so a person never approves one that no call waits for.
    from toolkeeper.ledger.postgres import PostgresStore

    keepers = [
        Keeper(principal=APP, ledger=PostgresStore(postgres_url(), schema=pg_schema))
        for _ in range(4)
    ]
    for keeper in keepers:

        @keeper.tool(effect="destructive")
        async def wipe(path: str) -> str:
            return path

        await keeper.open()
    call = ToolCall(call_id="w1", task_id="race-approval", name="wipe", arguments={"path": "/p"})
    results: list[Any] = []
    try:

        async def propose(keeper: Keeper) -> None:
            results.append(await keeper.execute(call))

        async with anyio.create_task_group() as tg:
            for keeper in keepers:
                tg.start_soon(propose, keeper)
        pending = await keepers[0].approvals.pending()
        record = await keepers[0].store.get_call("race-approval", "w1")
    finally:
        for keeper in keepers:
            await keeper.aclose()
    assert record is not None
    assert [p.id for p in pending] == [record.approval_id]
    every = await _all_approvals(pg_schema)
    assert {a.status for a in every if a.id != record.approval_id} <= {ApprovalStatus.WITHDRAWN}
    assert {r.approval_id for r in results} == {record.approval_id}


async def _all_approvals(schema: str) -> list[Any]:
    from toolkeeper.ledger.postgres import PostgresStore

    async with PostgresStore(postgres_url(), schema=schema) as store:
        return await store.list_approvals()
