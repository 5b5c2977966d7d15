"""The part of the ledger contract about agent runs (`save_run`, `get_run`); `LedgerContract`
inherits it, so it runs against every backend."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar

import anyio
import pytest

from toolkeeper.ledger import LedgerStore, RunRecord, StaleRun

Connect = Callable[[], Awaitable[LedgerStore]]


def run(status: str = "awaiting_approval", **state: object) -> RunRecord:
    return RunRecord(run_id="run-1", status=status, state=json.dumps(state))


@pytest.mark.anyio
class RunContract:
    durable: ClassVar[bool] = True

    async def test_a_new_run_is_stored_at_version_one(self, store: LedgerStore) -> None:
        before = time.time()
        stored = await store.save_run(run(step=1), expected_version=0)
        assert stored.version == 1
        assert before <= stored.created_at == stored.updated_at <= time.time()
        assert await store.get_run("run-1") == stored

    async def test_an_unknown_run_reads_as_none(self, store: LedgerStore) -> None:
        assert await store.get_run("nope") is None

    async def test_a_save_over_the_version_read_replaces_the_state(
        self, store: LedgerStore
    ) -> None:
        first = await store.save_run(run(step=1), expected_version=0)
        second = await store.save_run(run("completed", step=2), expected_version=1)
        assert (second.version, second.status, json.loads(second.state)) == (
            2,
            "completed",
            {"step": 2},
        )
        assert second.created_at == first.created_at <= second.updated_at
        assert await store.get_run("run-1") == second

    async def test_a_save_over_a_stale_version_is_refused_and_changes_nothing(
        self, store: LedgerStore
    ) -> None:
        await store.save_run(run(step=1), expected_version=0)
        kept = await store.save_run(run(step=2), expected_version=1)
        for expected in (0, 1, 5):
            with pytest.raises(StaleRun) as refused:
                await store.save_run(run(step=99), expected_version=expected)
            assert (refused.value.expected, refused.value.actual) == (expected, 2)
        assert await store.get_run("run-1") == kept

    async def test_a_save_of_a_run_never_stored_over_a_version_is_refused(
        self, store: LedgerStore
    ) -> None:
        with pytest.raises(StaleRun) as refused:
            await store.save_run(run(), expected_version=3)
        assert refused.value.actual is None
        assert await store.get_run("run-1") is None

    async def test_of_concurrent_resumes_exactly_one_saves(self, connect: Connect) -> None:
        first = await connect()
        await first.save_run(run(step=1), expected_version=0)
        stores = [await connect() for _ in range(4)]
        won: list[int] = []

        async def resume(index: int, store: LedgerStore) -> None:
            try:
                await store.save_run(run("running", by=index), expected_version=1)
            except StaleRun:
                return
            won.append(index)

        async with anyio.create_task_group() as tg:
            for index, store in enumerate(stores):
                tg.start_soon(resume, index, store)
        assert len(won) == 1
        stored = await first.get_run("run-1")
        assert stored is not None and json.loads(stored.state) == {"by": won[0]}

    async def test_a_large_state_with_any_text_comes_back_byte_for_byte(
        self, store: LedgerStore
    ) -> None:
        state = json.dumps({"text": "é \u2028 \x00 " * 50_000}, ensure_ascii=False)
        await store.save_run(RunRecord(run_id="r", status="s", state=state), expected_version=0)
        found = await store.get_run("r")
        assert found is not None and found.state == state

    async def test_a_saved_run_survives_reopening(self, connect: Connect) -> None:
        if not self.durable:
            pytest.skip("not durable")
        store = await connect()
        await store.save_run(run(step=1), expected_version=0)
        await store.aclose()
        again = await connect()
        found = await again.get_run("run-1")
        assert found is not None and json.loads(found.state) == {"step": 1}
