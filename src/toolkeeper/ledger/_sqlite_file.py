"""The SQLite ledger's file: what is refused before it is opened, how a new one is created,
WAL mode, and the schema migrations run on opening (`SQLiteStore` uses these)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from ..core._paths import file_problem
from ..core.errors import StoreError
from .migrations import (
    INSERT_VERSION,
    SCHEMA_VERSION_DDL,
    SELECT_VERSIONS,
    missing,
    require_current,
)

__all__ = [
    "NoLedger",
    "create_private",
    "is_busy",
    "migrate",
    "problem",
    "refuse_foreign",
    "require_folder",
    "require_ledger",
    "use_wal",
]

_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL (once per file: the mode is stored in it).

    The switch needs an exclusive lock, and SQLite answers SQLITE_BUSY at once, without its
    busy handler, when two connections opening a new file at the same moment would otherwise
    wait for each other: so wait here, up to `timeout` (this runs in a worker thread).
    """
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


_WRITE_PROBE = "UPDATE schema_version SET version = version WHERE 0"
"""Writes nothing, and fails (SQLITE_READONLY) on a file this process may only read."""


def migrate(conn: sqlite3.Connection, *, writes: bool) -> None:
    if not writes:
        # Only read (the table is there: `require_ledger`), never upgraded; and a reader of a
        # WAL file does not wait for another process's write transaction, however long.
        require_current(row[0] for row in conn.execute(SELECT_VERSIONS))
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(SCHEMA_VERSION_DDL)
        applied = [row[0] for row in conn.execute(SELECT_VERSIONS)]
        for step in missing(applied):
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(INSERT_VERSION, (step.version, step.name, time.time()))
        if writes:  # told now, rather than by the record of every call
            conn.execute(_WRITE_PROBE)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def problem(exc: sqlite3.Error) -> str:
    """What SQLite's error about opening a file means, in words a person can act on."""
    code = getattr(exc, "sqlite_errorcode", None) or 0
    if is_busy(exc):
        return "another process held its write lock for longer than busy_timeout"
    if code == sqlite3.SQLITE_READONLY_DIRECTORY:
        return (
            "its folder is read-only to this process, and a ledger (in WAL mode) needs to "
            "create its -wal and -shm files beside it"
        )
    if code & 0xFF == sqlite3.SQLITE_READONLY:
        return "the file is read-only to this process"
    if code & 0xFF == sqlite3.SQLITE_CANTOPEN:
        return (
            "cannot open or create the file (a folder has that name, or this process may not "
            "read it or write its folder)"
        )
    return str(exc)


class NoLedger(StoreError):
    """The path holds no toolkeeper ledger: with `create=False`, or another program's
    database."""


def _tables(path: str) -> set[str]:
    """The tables of the database at `path`, read without writing to it (not created, not
    switched to WAL); SQLite's own (`sqlite_stat1` after ANALYZE...) left out.

    Raises:
        sqlite3.Error: it cannot be read as a database.
    """
    probe = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        probe.close()
    return {name for (name,) in rows if not name.startswith("sqlite_")}


def require_ledger(path: str) -> None:
    """Refuse a path that holds no toolkeeper ledger, without writing to it: not created,
    not switched to WAL, not migrated (another program's database stays as it was)."""
    if Path(path).is_dir():
        raise NoLedger(f"no ledger at {path}: it is a folder, not a ledger file")
    if not Path(path).is_file():
        raise NoLedger(f"no ledger at {path}: the file does not exist")
    try:
        tables = _tables(path)
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
            raise NoLedger(f"no ledger at {path}: {exc}") from exc
        raise StoreError(f"cannot read the SQLite ledger {path}: {problem(exc)}") from exc
    if not {"schema_version", "calls"} <= tables:
        raise NoLedger(f"no ledger at {path}: the file is not a toolkeeper ledger")


_LEDGER_TABLES = frozenset(
    {"schema_version", "calls", "results", "approvals", "budget_holds", "runs", "tool_pins"}
)


def refuse_foreign(path: str) -> None:
    """Refuse an existing database of another program (tables, none of them a ledger's),
    without writing to it: a ledger is only ever created in a new or empty file."""
    file = Path(path)
    if not file.is_file() or file.stat().st_size == 0:
        return
    try:
        tables = _tables(path)
    except sqlite3.Error:
        return  # not a database at all: opening it says so
    # A ledger's tables, or none yet (a new file, or one whose first migration never ran).
    ledger = tables <= _LEDGER_TABLES and (
        not tables or tables == {"schema_version"} or "calls" in tables
    )
    if not ledger:
        raise NoLedger(
            f"{path} holds another program's database ({len(tables)} tables), not a "
            "toolkeeper ledger; give a new file"
        )


def require_folder(path: str) -> None:
    """Refuse a path a ledger cannot be made at: a folder, or in a folder that does not exist
    (a mistyped path must not leave folders behind, nor a ledger where nobody looks).

    Raises:
        StoreError: it is one, saying which.
    """
    problem = file_problem(path, "name the ledger file in it")
    if problem is not None:
        raise StoreError(f"cannot open the SQLite ledger: {problem}")


def create_private(path: str) -> None:
    """Create the ledger file, empty, readable by its owner only (mode 0600) unless it exists
    (its mode is left as it is): SQLite gives its `-wal` and `-shm` files the same mode, and
    the records hold arguments and results. (What else fails, opening it says.)"""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
