"""Versioned schema migrations of the SQL ledger stores.

Each `Migration` is a numbered list of statements that both SQLite and PostgreSQL accept.
A store's `open()` creates `schema_version`, reads which versions it holds, and applies the
missing steps in order, each recorded in `schema_version` in the same transaction, under a
lock (SQLite `BEGIN IMMEDIATE`, a PostgreSQL advisory lock) so that two processes opening one
database at once apply every step exactly once. A database written by a newer toolkeeper (a
version above `LATEST`) is refused rather than guessed at. PostgreSQL reads the versions first
and takes the lock only when a step is missing, so a ledger at `LATEST` opens for a user who
may use its tables but not create any; so does SQLite when it opens a ledger only to read
(`create=False`), which then does not wait for another process's write. A store opened with
`create=False` (`toolkeeper ledger` and `approvals`) changes no schema: a ledger an older
toolkeeper wrote is refused (`require_current`), since once upgraded that toolkeeper, still
serving it, would refuse to open it again.

Add a step by appending a `Migration` with the next number; never edit a released one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..core.errors import StoreError

__all__ = [
    "INSERT_VERSION",
    "LATEST",
    "MIGRATIONS",
    "SCHEMA_VERSION_DDL",
    "SELECT_VERSIONS",
    "Migration",
    "missing",
    "require_current",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Migration:
    """One step of the schema."""

    version: int
    """Its number; steps apply in increasing order."""
    name: str
    """What it does, for people reading `schema_version`."""
    statements: tuple[str, ...]
    """SQL statements, valid on SQLite and PostgreSQL, with no placeholders."""


SCHEMA_VERSION_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " applied_at DOUBLE PRECISION NOT NULL)"
)
SELECT_VERSIONS = "SELECT version FROM schema_version"
INSERT_VERSION = "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="calls, results stored apart, approvals",
        statements=(
            """CREATE TABLE calls (
                task_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                version TEXT NOT NULL,
                digest TEXT NOT NULL,
                arguments TEXT NOT NULL,
                principal_id TEXT NOT NULL,
                tenant TEXT NOT NULL,
                status TEXT NOT NULL,
                effect TEXT NOT NULL,
                idempotent INTEGER NOT NULL,
                idempotency_key TEXT NOT NULL,
                attempt INTEGER NOT NULL,
                approval_id TEXT,
                effect_ref TEXT,
                result TEXT,
                result_ref TEXT,
                error TEXT,
                owner TEXT NOT NULL,
                deadline DOUBLE PRECISION,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                history TEXT NOT NULL,
                PRIMARY KEY (task_id, call_id))""",
            # Most calls end SUCCEEDED and are looked up by key (the primary key also serves
            # a task's calls); the index holds only the others, which lists by state need.
            "CREATE INDEX calls_unsettled ON calls (status, created_at)"
            " WHERE status <> 'SUCCEEDED'",
            """CREATE TABLE results (
                sha256 TEXT PRIMARY KEY,
                data TEXT NOT NULL,
                size BIGINT NOT NULL)""",
            """CREATE TABLE approvals (
                id TEXT PRIMARY KEY,
                task_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                version TEXT NOT NULL,
                principal_id TEXT NOT NULL,
                digest TEXT NOT NULL,
                arguments TEXT NOT NULL,
                reason TEXT NOT NULL,
                status TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                expires_at DOUBLE PRECISION,
                decided_by TEXT,
                decided_at DOUBLE PRECISION,
                note TEXT)""",
            "CREATE INDEX approvals_by_status ON approvals (status, created_at)",
        ),
    ),
    Migration(
        version=2,
        name="calls keep their results' MCP content blocks",
        statements=("ALTER TABLE calls ADD COLUMN content TEXT",),
    ),
    Migration(
        version=3,
        name="budget holds: a call's place in its task's budgets until its record counts",
        statements=(
            """CREATE TABLE budget_holds (
                tenant TEXT NOT NULL,
                task_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (tenant, task_id, call_id))""",
        ),
    ),
    Migration(
        version=4,
        name="agent runs: a paused run's state, resumable from any process",
        statements=(
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY,
                status TEXT NOT NULL,
                state TEXT NOT NULL,
                version INTEGER NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL)""",
        ),
    ),
    Migration(
        version=5,
        name="pinned tool definitions: each upstream tool's accepted definition, changes held",
        statements=(
            """CREATE TABLE tool_pins (
                name TEXT PRIMARY KEY,
                source TEXT NOT NULL,
                status TEXT NOT NULL,
                digest TEXT,
                definition TEXT,
                offered_digest TEXT,
                offered TEXT,
                findings TEXT NOT NULL,
                rev INTEGER NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                decided_by TEXT,
                history TEXT NOT NULL)""",
        ),
    ),
    Migration(
        version=6,
        name="pages of calls, newest first, by each filter an operator uses",
        statements=(
            "CREATE INDEX calls_newest ON calls (created_at, task_id, call_id)",
            "CREATE INDEX calls_by_tool ON calls (tool, created_at, task_id, call_id)",
            "CREATE INDEX calls_by_principal ON calls (principal_id, created_at, task_id, call_id)",
            "CREATE INDEX calls_by_status ON calls (status, created_at, task_id, call_id)",
            "CREATE INDEX calls_by_call_id ON calls (call_id)",
        ),
    ),
    Migration(
        version=7,
        name="drop calls_unsettled: calls_by_status serves every list by state",
        # (every write call paid for both: an entry added when RUNNING, removed when ended)
        statements=("DROP INDEX IF EXISTS calls_unsettled",),
    ),
)

LATEST = MIGRATIONS[-1].version
"""The schema version this toolkeeper writes."""


def missing(applied: Iterable[int]) -> list[Migration]:
    """The steps not yet in `applied`, in order.

    Raises:
        StoreError: the database holds a version newer than this toolkeeper knows.
    """
    done = set(applied)
    newer = {v for v in done if v > LATEST}
    if newer:
        raise StoreError(
            f"the ledger schema is at version {max(newer)}, newer than this toolkeeper "
            f"supports ({LATEST}); upgrade toolkeeper"
        )
    return [m for m in MIGRATIONS if m.version not in done]


def require_current(applied: Iterable[int]) -> None:
    """Refuse a ledger that lacks a step, for a store that opens it without changing it.

    Raises:
        StoreError: a step is missing (an older toolkeeper wrote the ledger), or the ledger
            holds a version newer than this toolkeeper knows.
    """
    done = set(applied)
    if missing(done):
        raise StoreError(
            f"the ledger schema is at version {max(done, default=0)}, older than this "
            f"toolkeeper's ({LATEST}); it is upgraded when an application or gateway of this "
            "version opens it, never by a command that only looks at it or decides on it"
        )
