"""A process that dies while its calls run: after it, the calls of non-idempotent tools become
UNKNOWN_OUTCOME and those of idempotent tools stay RUNNING for the executor to take over."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from toolkeeper.core.errors import ErrorCode
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import LedgerStore, PostgresStore, SQLiteStore, recover_abandoned

from ..conftest import postgres_url
from .records import call

pytestmark = pytest.mark.anyio


def _claim_and_die(*args: str) -> None:
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("claim_and_die.py")), *args],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


async def _assert_recovered(store: LedgerStore) -> None:
    await store.claim_call(call("mine", task_id="crash"))

    changed = await recover_abandoned(store)

    assert [(r.call_id, r.status) for r in changed] == [("transfer", CallStatus.UNKNOWN_OUTCOME)]
    [unknown] = changed
    assert unknown.error is not None and unknown.error["code"] == ErrorCode.UNKNOWN_OUTCOME
    assert [s for s, _ in unknown.history] == [CallStatus.RUNNING, CallStatus.UNKNOWN_OUTCOME]
    running = await store.list_calls(statuses=[CallStatus.RUNNING], task_id="crash")
    assert sorted(r.call_id for r in running) == ["lookup", "mine"]


async def test_sqlite_calls_of_a_killed_process_are_recovered(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _claim_and_die(f"sqlite:///{path}")
    async with SQLiteStore(path) as store:
        await _assert_recovered(store)


@pytest.mark.postgres
async def test_postgres_calls_of_a_killed_process_are_recovered(pg_schema: str) -> None:
    _claim_and_die(postgres_url(), pg_schema)
    async with PostgresStore(postgres_url(), schema=pg_schema) as store:
        await _assert_recovered(store)


@pytest.mark.postgres
async def test_racing_recoveries_change_each_call_once(pg_schema: str) -> None:
    _claim_and_die(postgres_url(), pg_schema)
    stores = [PostgresStore(postgres_url(), schema=pg_schema) for _ in range(4)]
    changed: list[str] = []

    async def recover(store: PostgresStore) -> None:
        async with store:
            changed.extend(r.call_id for r in await recover_abandoned(store))

    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(recover, store)
    assert changed == ["transfer"]
