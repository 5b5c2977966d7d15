"""The SQLite store commits finished read-only calls together, and nothing else late."""

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import CallRecord, SQLiteStore

from .locking import claim_while_locked
from .records import call

pytestmark = pytest.mark.anyio


def _finished_read(call_id: str) -> CallRecord:
    return call(call_id, status=CallStatus.SUCCEEDED, effect="read_only", result={"n": 1})


def _committed(path: Path) -> set[str]:
    """Call ids another connection (another process) can read."""
    with sqlite3.connect(path) as other:
        return {row[0] for row in other.execute("SELECT call_id FROM calls")}


def _python(arguments: list[str]) -> subprocess.CompletedProcess[bytes]:
    """A child Python run from the repository (where it imports `tests.ledger`)."""
    return subprocess.run(
        [sys.executable, *arguments],
        capture_output=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).parents[2],
    )


async def _until_committed(path: Path, call_id: str) -> None:
    with anyio.fail_after(5):
        while call_id not in _committed(path):
            await anyio.lowlevel.checkpoint()


async def test_a_finished_read_is_committed_within_the_delay(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path, commit_delay=0.01) as store:
        await store.claim_call(_finished_read("r1"))
        assert (await store.get_call("task-1", "r1")) is not None  # this store sees it at once
        await _until_committed(path, "r1")


async def test_a_call_with_side_effects_is_committed_before_the_claim_returns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path, commit_delay=60) as store:
        await store.claim_call(_finished_read("r1"))
        await store.claim_call(call("w1"))  # RUNNING, effect write
        # The write's commit takes the pending read with it.
        assert _committed(path) == {"r1", "w1"}
        await store.claim_call(_finished_read("r2"))
        await store.transition(
            "task-1", "w1", expected=CallStatus.RUNNING, target=CallStatus.SUCCEEDED
        )
        assert _committed(path) == {"r1", "r2", "w1"}


async def test_closing_the_store_commits_what_is_pending(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path, commit_delay=60) as store:
        await store.claim_call(_finished_read("r1"))
        assert _committed(path) == set()
    assert _committed(path) == {"r1"}


async def test_without_a_delay_every_record_is_committed_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path, commit_delay=0) as store:
        await store.claim_call(_finished_read("r1"))
        assert _committed(path) == {"r1"}


async def test_another_writer_waits_for_a_pending_batch_then_writes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with (
        SQLiteStore(path, commit_delay=0.05) as first,
        SQLiteStore(path, commit_delay=0.05) as second,
    ):
        await first.claim_call(_finished_read("r1"))
        # `first` holds the write lock until its batch commits; `second` waits off the loop.
        _, created = await second.claim_call(call("w1"))
        assert created
        assert _committed(path) == {"r1", "w1"}


async def test_a_store_locked_out_of_its_batch_still_records_the_read(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path, commit_delay=60) as store:
        assert await claim_while_locked(store, path, _finished_read("r1"))
        assert _committed(path) == {"r1"}  # written durably by the waiting connection


def test_a_claim_after_a_full_disk_lost_the_batch_is_reported_as_it_landed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    child = _python(["-m", "tests.ledger.write_after_a_full_disk", str(path)])
    # The failed statement ended the batch, so the RUNNING claim committed on its own: it must
    # say so, not fail on a COMMIT with no transaction left (its call refused, its record kept).
    assert child.stdout.decode().split() == ["refused", "created"], child.stderr.decode()
    assert _committed(path) == {"w1"}  # the pending read went with the failed transaction
    assert "lost a batch" in child.stderr.decode()


def test_a_process_that_exits_without_closing_the_store_commits_what_is_pending(
    tmp_path: Path,
) -> None:
    # A script that never closes its store (or its keeper) ends while the batch waits for its
    # commit, on a daemon thread that exit stops where it stands.
    path = tmp_path / "ledger.db"
    script = (
        "import sys, anyio\n"
        "from toolkeeper.core.states import CallStatus\n"
        "from toolkeeper.ledger import SQLiteStore\n"
        "from tests.ledger.records import call\n"
        "async def main():\n"
        "    store = SQLiteStore(sys.argv[1], commit_delay=60)\n"
        "    await store.open()\n"
        "    await store.claim_call(call('r1', status=CallStatus.SUCCEEDED, effect='read_only'))\n"
        "anyio.run(main)\n"
    )
    child = _python(["-c", script, str(path)])
    assert child.returncode == 0, child.stderr.decode()
    assert _committed(path) == {"r1"}


def test_a_forked_child_that_exits_commits_none_of_its_parents_batch(tmp_path: Path) -> None:
    # The child's copy of the batch is the parent's transaction, without the file's write lock
    # (a POSIX lock is not inherited): it committed it at its exit, behind the parent's back.
    path = tmp_path / "ledger.db"
    script = (
        "import os, sqlite3, sys, anyio\n"
        "from toolkeeper.core.states import CallStatus\n"
        "from toolkeeper.ledger import SQLiteStore\n"
        "from tests.ledger.records import call\n"
        "store = SQLiteStore(sys.argv[1], commit_delay=60)\n"
        "async def claim(call_id):\n"
        "    await store.open()\n"
        "    read = call(call_id, status=CallStatus.SUCCEEDED, effect='read_only')\n"
        "    await store.claim_call(read)\n"
        "anyio.run(claim, 'r1')\n"
        "if os.fork() == 0:\n"
        "    sys.exit(0)  # a worker, or a daemonizing parent: it ends as any process does\n"
        "os.wait()\n"
        "other = sqlite3.connect(sys.argv[1])\n"
        "print(len(other.execute('SELECT call_id FROM calls').fetchall()))\n"
        "other.close()\n"
        "anyio.run(claim, 'r2')\n"
        "anyio.run(store.aclose)\n"
    )
    child = _python(["-c", script, str(path)])
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout.decode().split() == ["0"]  # r1 still waits for the parent's commit
    assert _committed(path) == {"r1", "r2"}
    assert b"lost a batch" not in child.stderr, child.stderr.decode()


def test_at_exit_a_batch_whose_connection_is_gone_keeps_no_other_from_committing(
    tmp_path: Path,
) -> None:
    # (a connection closed at exit by another thread, say)
    from toolkeeper.ledger._group_commit import GroupCommit, Mode, _open

    batches = []
    for name in ("gone", "kept"):
        conn = sqlite3.connect(
            tmp_path / f"{name}.db", isolation_level=None, check_same_thread=False
        )
        conn.execute("CREATE TABLE t (x)")
        batch = GroupCommit(conn, delay=60)
        batch.run(lambda c: c.execute("INSERT INTO t VALUES (1)"), Mode.DEFERRED)
        batches.append(batch)
    gone = batches[0]
    try:
        gone.conn.close()
        _open.finish_all()
        with sqlite3.connect(tmp_path / "kept.db") as other:
            assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
    finally:
        for batch in batches:
            with contextlib.suppress(sqlite3.Error):
                batch.close()
