from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from toolkeeper import Keeper
from toolkeeper.core.errors import StoreError
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import LedgerStore, SQLiteStore
from toolkeeper.ledger import _sql as q
from toolkeeper.ledger.migrations import (
    INSERT_VERSION,
    LATEST,
    MIGRATIONS,
    SCHEMA_VERSION_DDL,
    SELECT_VERSIONS,
)
from toolkeeper.ledger.sqlite import NoLedger

from .contract import Connect, LedgerContract
from .locking import claim_while_locked
from .pages_contract import PagesContract
from .records import call, hold

pytestmark = pytest.mark.anyio


class TestSQLiteStore(LedgerContract, PagesContract):
    @pytest.fixture
    async def connect(self, tmp_path: Path) -> AsyncIterator[Connect]:
        opened: list[SQLiteStore] = []

        async def connect() -> LedgerStore:
            store = SQLiteStore(tmp_path / "ledger.db")
            await store.open()
            opened.append(store)
            return store

        yield connect
        for store in opened:
            await store.aclose()


def test_threads_racing_on_one_file_claim_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    anyio.run(SQLiteStore(path).open)
    start = threading.Barrier(8)
    wins: list[bool] = []

    async def claim(i: int) -> None:
        async with SQLiteStore(path) as store:
            start.wait(timeout=60)
            _, inserted = await store.claim_call(call("raced", owner=f"host:{i}"))
            wins.append(inserted)

    threads = [threading.Thread(target=anyio.run, args=(claim, i)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(wins) == [False] * 7 + [True]


async def test_a_locked_file_is_waited_for_off_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        assert await claim_while_locked(store, path, call())


async def test_a_lock_held_past_the_busy_timeout_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path, busy_timeout=0.05) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError):
                await store.claim_call(call())
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert (await store.claim_call(call()))[1]


@pytest.mark.parametrize("attempt", range(5))
async def test_migrations_apply_once_however_often_the_file_is_opened(
    tmp_path: Path, attempt: int
) -> None:
    # Several stores opening a new file at once: one switches it to WAL and migrates it,
    # the others wait for that instead of failing with "database is locked".
    path = tmp_path / "ledger.db"
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(_open_and_close, path)
    await _open_and_close(path)
    with sqlite3.connect(path) as conn:
        versions = conn.execute("SELECT version FROM schema_version").fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()
    assert versions == [(v,) for v in range(1, LATEST + 1)]
    assert mode == ("wal",)


async def _open_and_close(path: Path) -> None:
    async with SQLiteStore(path):
        pass


async def test_a_schema_newer_than_this_toolkeeper_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    await _open_and_close(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (?, 'from the future', 0)", (LATEST + 1,))
    store = SQLiteStore(path)
    with pytest.raises(StoreError, match="newer"):
        await store.open()
    await store.aclose()


async def test_a_ledger_written_before_content_blocks_were_kept_opens_and_keeps_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        old, _ = await store.claim_call(call("old", status=CallStatus.SUCCEEDED, result="x"))
    with sqlite3.connect(path) as conn:  # as version 1 left it
        conn.execute("ALTER TABLE calls DROP COLUMN content")
        conn.execute("DROP TABLE budget_holds")
        conn.execute("DROP TABLE runs")
        conn.execute("DROP TABLE tool_pins")
        for index in ("newest", "by_tool", "by_principal", "by_status", "by_call_id"):
            conn.execute(f"DROP INDEX calls_{index}")
        conn.execute(
            "CREATE INDEX calls_unsettled ON calls (status, created_at) WHERE status <> 'SUCCEEDED'"
        )
        conn.execute("DELETE FROM schema_version WHERE version > 1")
    blocks = ({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},)
    async with SQLiteStore(path) as store:
        assert await store.get_call("task-1", "old") == old
        new, _ = await store.claim_call(
            call("new", status=CallStatus.SUCCEEDED, result=[dict(blocks[0])], content=blocks)
        )
        assert await store.get_call("task-1", "new") == new
    assert new.content == blocks


async def test_lists_by_state_search_an_index_and_a_call_writes_no_redundant_one(
    tmp_path: Path,
) -> None:
    # Recovery lists the unsettled calls of a ledger of millions: by an index, never a scan.
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path):
        pass
    with sqlite3.connect(path) as conn:
        for statuses in ([CallStatus.RUNNING], [CallStatus.RUNNING, CallStatus.CANCELLED]):
            sql, params = q.list_calls_query(statuses, None, 100)
            plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
            assert "SEARCH c USING INDEX calls_by_status" in plan, plan
        indexes = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
    assert "calls_unsettled" not in indexes  # (calls_by_status covers it; each write paid twice)


async def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "ledger.db")
    with pytest.raises(StoreError):
        await store.get_call("t", "c")
    await store.open()
    await store.aclose()
    with pytest.raises(StoreError):
        await store.get_call("t", "c")
    with pytest.raises(StoreError):
        await store.open()


async def test_an_in_memory_database_works_within_one_store() -> None:
    async with SQLiteStore(":memory:") as store:
        await store.claim_call(call())
        moved = await store.transition(
            "task-1", "call-1", expected=CallStatus.RUNNING, target=CallStatus.SUCCEEDED
        )
        assert await store.get_call("task-1", "call-1") == moved


async def test_without_create_a_missing_file_is_refused_and_an_existing_one_opens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dir" / "ledger.db"
    with pytest.raises(StoreError, match="no ledger at"):
        await SQLiteStore(path, create=False).open()
    assert not path.parent.exists()
    path.parent.mkdir()
    async with SQLiteStore(path) as store:
        await store.claim_call(call())
    async with SQLiteStore(path, create=False) as store:
        assert (await store.get_call("task-1", "call-1")) is not None


def _versions(path: Path) -> list[int]:
    db = sqlite3.connect(path)
    try:
        return sorted(row[0] for row in db.execute(SELECT_VERSIONS))
    finally:
        db.close()


async def test_without_create_an_older_ledger_is_refused_not_upgraded(tmp_path: Path) -> None:
    """`toolkeeper ledger list` upgraded a ledger an older toolkeeper wrote, which that
    toolkeeper, still serving it, then refused to open ("newer than this toolkeeper")."""
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    with db:  # what toolkeeper wrote at schema version 1
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(SCHEMA_VERSION_DDL)
        for statement in MIGRATIONS[0].statements:
            db.execute(statement)
        db.execute(INSERT_VERSION, (1, MIGRATIONS[0].name, 0.0))
    db.close()
    with pytest.raises(StoreError, match="older than this toolkeeper"):
        await SQLiteStore(path, create=False).open()
    assert _versions(path) == [1]
    async with SQLiteStore(path):  # the application's open upgrades it
        pass
    assert _versions(path) == list(range(1, LATEST + 1))
    async with SQLiteStore(path, create=False) as store:
        assert await store.list_calls() == []


async def test_without_create_another_programs_database_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE people (name TEXT)")
    empty = tmp_path / "empty.db"
    empty.touch()
    before = other.read_bytes()
    for path in (other, empty):
        with pytest.raises(StoreError, match="not a toolkeeper ledger"):
            await SQLiteStore(path, create=False).open()
    assert other.read_bytes() == before and empty.read_bytes() == b""
    assert not (tmp_path / "app.db-wal").exists()


async def test_without_create_a_ledger_out_of_wal_mode_is_read_and_left_in_its_mode(
    tmp_path: Path,
) -> None:
    """`toolkeeper ledger list` on a copy made by `VACUUM INTO` (a rollback journal) switched
    the copy to WAL, writing to a file it only looked at (and failing where it may not)."""
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        await store.claim_call(call())
    copy = tmp_path / "copy.db"
    with sqlite3.connect(path) as db:
        db.execute("VACUUM INTO ?", (str(copy),))
    before = copy.read_bytes()
    async with SQLiteStore(copy, create=False) as reader:
        assert await reader.get_call("task-1", "call-1") is not None
    assert copy.read_bytes() == before
    assert not (tmp_path / "copy.db-wal").exists()


async def test_a_ledger_is_never_created_in_another_programs_database(tmp_path: Path) -> None:
    """`serve --ledger sqlite:///app.db` added the ledger's tables to the app's database and
    switched it to WAL; an empty file may still become a ledger."""
    for name, tables in (
        ("app.db", ["people (name TEXT)"]),
        # `schema_version` is a common name: it alone does not make a ledger
        ("versioned.db", ["users (id INTEGER)", "schema_version (version INTEGER)"]),
    ):
        other = tmp_path / name
        with sqlite3.connect(other) as db:
            for table in tables:
                db.execute(f"CREATE TABLE {table}")
        before = other.read_bytes()
        with pytest.raises(StoreError, match="another program's database"):
            await SQLiteStore(other).open()
        assert other.read_bytes() == before and not (tmp_path / f"{name}-wal").exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    async with SQLiteStore(empty) as store:
        await store.claim_call(call())
    with sqlite3.connect(empty) as db:
        db.execute("ANALYZE")  # SQLite's own statistics table is no other program's
    async with SQLiteStore(empty) as store:
        assert await store.get_call("task-1", "call-1") is not None


async def test_a_file_where_the_folder_would_be_is_a_store_error(tmp_path: Path) -> None:
    # FileExistsError escaped `open`, documented to raise StoreError.
    blocker = tmp_path / "ledgers"
    blocker.write_text("not a folder")
    store = SQLiteStore(blocker / "ledger.db")
    with pytest.raises(StoreError, match="folder"):
        await store.open()
    await store.aclose()
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("url", [False, True])
async def test_a_ledger_in_a_folder_that_does_not_exist_is_refused_and_makes_none(
    tmp_path: Path, url: bool
) -> None:
    """A mistyped path made its folders and an empty ledger nobody looks at; the command line
    refused it (`eval --cache`), the library did not."""
    path = tmp_path / "no" / "such" / "x.db"
    keeper = Keeper(ledger=f"sqlite:///{path}" if url else path)
    with pytest.raises(StoreError, match=r"folder of .* does not exist"):
        async with keeper:
            pass
    assert os.listdir(tmp_path) == []


async def test_a_folder_given_as_the_ledger_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    with pytest.raises(StoreError, match="is a folder"):
        await store.open()
    await store.aclose()


def _read_only(path: Path) -> Path:
    """`path` made read-only; skips where permissions do not bind this process (root)."""
    path.chmod(0o555 if path.is_dir() else 0o444)
    if os.access(path, os.W_OK):
        pytest.skip("this process may write whatever the permissions say (root)")
    return path


async def test_a_ledger_file_this_process_may_only_read_is_refused_when_opened_to_write(
    tmp_path: Path,
) -> None:
    # It opened, and the record of every call then failed ("attempt to write a readonly
    # database"): a gateway answered INTERNAL_ERROR to each call instead of failing to start.
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        await store.claim_call(call())
    _read_only(path)
    writer = SQLiteStore(path)
    with pytest.raises(StoreError, match="read-only"):
        await writer.open()
    await writer.aclose()
    async with SQLiteStore(path, create=False) as reader:  # what `toolkeeper ledger list` opens
        assert await reader.get_call("task-1", "call-1") is not None


async def test_a_ledger_in_a_folder_this_process_may_only_read_is_not_called_missing(
    tmp_path: Path,
) -> None:
    # `toolkeeper ledger list` said "no ledger at ...", and to pass --ledger.
    path = tmp_path / "ledgers" / "ledger.db"
    path.parent.mkdir()
    async with SQLiteStore(path):
        pass
    _read_only(path.parent)
    try:
        for create in (False, True):
            store = SQLiteStore(path, create=create)
            with pytest.raises(StoreError, match="folder is read-only") as caught:
                await store.open()
            await store.aclose()
            assert not isinstance(caught.value, NoLedger)
    finally:
        path.parent.chmod(0o755)


async def test_a_store_opened_to_read_does_not_wait_for_another_process_writing(
    tmp_path: Path,
) -> None:
    # `toolkeeper ledger list` took the write lock to open, so it waited for any write
    # transaction, and failed ("database is locked") past busy_timeout.
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        await store.claim_call(call())
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        async with SQLiteStore(path, create=False, busy_timeout=0.05) as reader:
            assert await reader.get_call("task-1", "call-1") is not None
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_a_new_ledger_and_its_wal_and_shm_files_are_their_owners_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        await store.claim_call(call("c1", status=CallStatus.RUNNING))
        made = [path, tmp_path / "ledger.db-wal", tmp_path / "ledger.db-shm"]
        assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in made} == {
            p.name: 0o600 for p in made
        }


async def test_an_existing_ledger_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch()
    path.chmod(0o640)
    async with SQLiteStore(path):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


async def test_a_task_keeps_only_the_budget_holds_of_calls_in_flight(tmp_path: Path) -> None:
    """Holds superseded by their call's record were kept until they expired, and every later
    hold of the task counted through all of them (a budgeted call slowed with each one)."""
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        for i in range(50):
            assert await store.hold_budget(hold(f"c{i}", limits=((None, 1000),))) is None
            await store.claim_call(call(f"c{i}", task_id="t", status=CallStatus.SUCCEEDED))
        assert await store.hold_budget(hold("in-flight", limits=((None, 1000),))) is None
    with sqlite3.connect(path) as conn:
        left = [row[0] for row in conn.execute("SELECT call_id FROM budget_holds")]
    assert left == ["in-flight"]
