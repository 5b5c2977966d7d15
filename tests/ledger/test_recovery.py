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
from toolkeeper.ledger.recovery import mark_unknown

from ..conftest import APP, postgres_url
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


def test_a_live_owner_on_this_host_is_not_abandoned_however_late() -> None:
    """A process whose loop is blocked (or that is paused) past its call's deadline was taken
    for dead: another took its idempotent call over and ran it at the same time, or marked
    its call UNKNOWN_OUTCOME so that its result was lost. A pid taken again by a process
    that started after the call did is still the sign of a dead owner."""
    import socket
    import time

    from toolkeeper.ledger.base import is_abandoned

    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            owner = f"{socket.gethostname()}:{other.pid}"
            now = time.time()
            running = CallStatus.RUNNING
            # claimed (RUNNING) after the owner started; and long before this pid's process did
            late = call("late", owner=owner, deadline=now - 600.0, history=((running, now),))
            reused = call(
                "reused", owner=owner, deadline=now - 600.0, history=((running, now - 3600),)
            )
            assert not is_abandoned(late, now=now)
            assert is_abandoned(reused, now=now)
        finally:
            other.kill()


async def test_an_open_keeper_sees_and_settles_calls_of_a_process_that_died_since(
    tmp_path: Path,
) -> None:
    """Only opening a keeper looked for dead processes' calls: one already open listed none,
    and settling one said "RUNNING, not UNKNOWN_OUTCOME"."""
    from toolkeeper import Keeper

    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    async with Keeper(principal=APP, ledger=ledger) as keeper:
        assert await keeper.unknown() == []
        _claim_and_die(ledger)
        [unknown] = await keeper.unknown()
        settled = await keeper.settle(
            "crash", unknown.call_id, succeeded=False, by="ann", note="never arrived"
        )
    assert unknown.call_id == "transfer" and settled.status is CallStatus.FAILED


def test_a_dead_owner_its_parent_has_not_reaped_is_dead() -> None:
    """A zombie answers kill(pid, 0) and keeps its start time: its call stayed RUNNING."""
    import socket
    import time

    from toolkeeper.ledger.base import is_abandoned

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claimed = time.time()
        child.kill()
        for _ in range(1_000_000):  # until the kernel has made it a zombie (no reaping here)
            with open(f"/proc/{child.pid}/stat") as stat:
                if stat.read().rpartition(")")[2].split()[0] == "Z":
                    break
        owner = f"{socket.gethostname()}:{child.pid}"
        record = call("z", owner=owner, history=((CallStatus.RUNNING, claimed),))
        assert is_abandoned(record, now=time.time())
    finally:
        child.wait()


async def test_a_call_its_owner_retried_since_it_was_found_abandoned_is_left_running(
    tmp_path: Path,
) -> None:
    """Recovery judged a record of another host abandoned by its deadline, then marked the
    call UNKNOWN_OUTCOME whatever had happened since: an owner alive after all (a paused
    process, a clock behind) that had meanwhile written its next attempt, with a new deadline,
    lost the call it was running, and its result with it."""
    import time

    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as recovery, SQLiteStore(path) as owner:
        late = call(
            "late", task_id="crash", owner="elsewhere:1", attempt=1, deadline=time.time() - 600
        )
        found, _ = await recovery.claim_call(late)
        await owner.transition(
            "crash",
            "late",
            expected=CallStatus.RUNNING,
            target=CallStatus.RUNNING,
            changes={"attempt": 2, "deadline": time.time() + 600},
            expected_attempt=1,
        )

        assert await mark_unknown(recovery, found) is None

        record = await recovery.get_call("crash", "late")
        assert record is not None and (record.status, record.attempt) == (CallStatus.RUNNING, 2)
