"""The SQLite ledger store: the embedded default, one file (`./toolkeeper.db`), no server.

What it is: `LedgerStore` on the standard library's `sqlite3`, in WAL mode with
`synchronous=NORMAL` (a commit survives a crash of the process; a power loss may lose the
last commits, never corrupt the file). Several processes may share one file: claims and
transitions are compare-and-set statements, so exactly one process wins each.

What it is not: a store for several hosts (use `PostgresStore`), or safe on a network file
system.

How it runs blocking work: every ledger operation is a few statements on a local file that
take tens of microseconds, far less than a hop to a worker thread (50-100 us). So a store
first runs an operation directly on the event loop thread, on a connection with no busy
timeout. Only when the file is locked by another writer (`SQLITE_BUSY`) does it run the
operation again in a worker thread, on a second connection that waits up to `busy_timeout`,
so the event loop never waits for another process. A WAL checkpoint (every ~1000 pages)
does run on the loop and may take a few milliseconds.

What it commits when: every write is committed before the store returns, except the record of
a finished read-only call, which waits up to `commit_delay` to share one commit with others
(`_group_commit.py`): a crash may lose the read-only calls of its last few milliseconds, never
a call with side effects.

A transition is one `UPDATE` that checks the state and appends to the history. When the store
holds the version of the record it last read or wrote (unsettled calls only), the update is
also guarded by that version and the new record is computed from it rather than read back,
which saves a quarter of a write path; if anyone else wrote in between, the guard fails and
the store falls back to `UPDATE ... RETURNING`.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio.to_thread

from ..core.errors import ConfigurationError, StoreError
from ..core.states import CallStatus
from ..core.values import Effect
from . import _rows as codec
from . import _runs as runs
from . import _sql as q
from ._group_commit import GroupCommit, Mode
from ._sqlite_file import (
    NoLedger,
    create_private,
    is_busy,
    migrate,
    problem,
    refuse_foreign,
    require_folder,
    require_ledger,
    use_wal,
)
from .base import (
    ApprovalRecord,
    ApprovalStatus,
    BudgetHold,
    CallRecord,
    RunRecord,
    StaleRun,
    StaleState,
)
from .keys import key_file
from .pages import CallQuery, page_calls_query
from .pins import SQLitePins
from .transitions import apply_checked, check_decision, check_transition, not_pending, stamp_new

__all__ = ["NoLedger", "SQLiteStore"]

T = TypeVar("T")

_IN_MEMORY = frozenset({":memory:", ""})
_RECENT_LIMIT = 1024

DEFAULT_COMMIT_DELAY = 0.005
"""Seconds a finished read-only call's record may wait for a shared commit."""


def _claim_mode(record: CallRecord) -> Mode:
    """A finished read-only call's record may wait for a shared commit; nothing else may."""
    if record.effect == Effect.READ_ONLY and record.status.terminal:
        return Mode.DEFERRED
    return Mode.WRITE


class SQLiteStore(SQLitePins):
    """`LedgerStore` in one SQLite file.

    Use one instance per event loop; open it before use (or use it as an async context
    manager).

    Args:
        path: The database file; created when missing, in a folder that must exist (a
            folder, or a path in one that does not exist, is a `StoreError` when it opens: a
            mistyped path makes no folders). `":memory:"` gives a private in-memory database
            (nothing survives, nothing is shared).
        create: When False, `open` refuses a file that does not exist instead of creating
            an empty ledger (for tools that only inspect one: a mistyped path is an error,
            not an empty ledger), opens one this process may only read, leaves its journal
            mode as it is (a copy made by `VACUUM INTO` stays out of WAL), and refuses one an
            older toolkeeper wrote instead of upgrading its schema. When True,
            `open` refuses a file it may not write, rather than every call's record failing.
        busy_timeout: Seconds an operation waits for another process's write lock before it
            fails with `StoreError`.
        commit_delay: Seconds the record of a finished read-only call may wait to be committed
            together with others (see `_group_commit.py`): a crash may lose the read-only
            calls of that last moment, never a call with side effects. 0 commits each record
            at once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "toolkeeper.db",
        *,
        busy_timeout: float = 10.0,
        commit_delay: float = DEFAULT_COMMIT_DELAY,
        create: bool = True,
    ):
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self.commit_delay = commit_delay
        self.create = create
        self._state = q.Lifecycle.NEW
        self._open_lock: anyio.Lock | None = None
        self._batch: GroupCommit | None = None
        self._slow: sqlite3.Connection | None = None
        self._slow_lock = threading.Lock()
        self._recent: dict[tuple[str, str], tuple[CallRecord, int]] = {}
        self._digest_key = secrets.token_bytes(32) if self.path in _IN_MEMORY else None

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def digest_key(self) -> bytes:
        """The key of this ledger's digests (`ledger.keys`): held in the file `<path>.key`
        beside it (links resolved: processes naming the file by a link use its key too), made
        (mode 0600) when the ledger is opened with `create`. Random for `:memory:`, and for a
        ledger opened without `create` that has none (an older toolkeeper's: its digests are
        plain SHA-256, and a key would not check them either).

        Raises:
            ConfigurationError: the key file cannot be read or made.
        """
        if self._digest_key is None:
            path = os.path.realpath(self.path) + ".key"
            if self.create or os.path.exists(path):
                self._digest_key = key_file(path, create=self.create)
            else:
                self._digest_key = secrets.token_bytes(32)
        return self._digest_key

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the file, switch it to WAL and apply missing migrations (neither when
        `create` is False). Idempotent.

        Raises:
            StoreError: the file cannot be opened or migrated (its folder does not exist, it
                or its folder is read-only), does not exist or needs migrating while `create`
                is False, may only be read while `create` is True, or the store was closed.
        """
        await q.open_once(self)

    async def _open(self) -> None:
        if self._state is q.Lifecycle.CLOSED:
            raise StoreError("the ledger store is closed")
        try:
            await anyio.to_thread.run_sync(self._connect)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite ledger {self.path}: {problem(exc)}") from exc
        self._state = q.Lifecycle.OPEN

    def _connection(self, timeout: float) -> sqlite3.Connection:
        # Set up while waiting for locks like every opener (another one may be switching a
        # new file to WAL), then keep the busy timeout asked for.
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA synchronous=NORMAL")
        if timeout != self.busy_timeout:
            conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        return conn

    def _connect(self) -> None:
        if self.path not in _IN_MEMORY:
            if not self.create:
                require_ledger(self.path)
            else:
                require_folder(self.path)
                refuse_foreign(self.path)
                create_private(self.path)
                try:
                    self.digest_key()
                except ConfigurationError as exc:
                    raise StoreError(str(exc)) from exc
        slow = self._connection(self.busy_timeout)
        try:
            if self.create:  # a store that only reads leaves the file's journal as it is
                use_wal(slow, self.busy_timeout)
            migrate(slow, writes=self.create)
            fast = slow if self.path in _IN_MEMORY else self._connection(0.0)
        except BaseException:
            slow.close()
            raise
        self._slow = slow
        self._batch = GroupCommit(fast, delay=self.commit_delay)

    async def aclose(self) -> None:
        """Commit what is pending and close the connections. Idempotent."""
        self._state = q.Lifecycle.CLOSED
        batch, self._batch = self._batch, None
        if batch is not None:
            await anyio.to_thread.run_sync(batch.close)
        fast = batch.conn if batch is not None else None
        slow, self._slow = self._slow, None
        for conn in {id(c): c for c in (fast, slow) if c is not None}.values():
            with self._slow_lock:
                conn.close()

    async def _run(self, op: Callable[[sqlite3.Connection], T], mode: Mode = Mode.READ) -> T:
        """Run `op` on the loop thread; if the file is locked, again in a worker thread.

        `op` must be safe to run twice: a busy error may interrupt it after a statement.
        """
        batch, slow = self._batch, self._slow
        if batch is None or slow is None:
            raise StoreError(f"the ledger store is {self._state}, not open")
        try:
            return batch.run(op, mode)
        except sqlite3.Error as exc:
            if not is_busy(exc):
                raise StoreError(f"SQLite ledger error: {exc}") from exc
        batch.flush()  # our own pending batch holds the write lock the worker will wait for

        def locked() -> T:
            with self._slow_lock:
                return op(slow)

        try:
            return await anyio.to_thread.run_sync(locked)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite ledger error: {exc}") from exc

    # -- calls -----------------------------------------------------------------------------

    def _remember(self, record: CallRecord, history_length: int) -> CallRecord:
        """Keep an unsettled record this store read or wrote, to transition it without
        reading it back (see `Transition.guarded_sql`). Call on the event loop thread only."""
        key = (record.task_id, record.call_id)
        self._recent.pop(key, None)
        if not record.status.terminal:
            if len(self._recent) >= _RECENT_LIMIT:
                del self._recent[next(iter(self._recent))]
            self._recent[key] = (record, history_length)
        return record

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        def op(conn: sqlite3.Connection) -> tuple[CallRecord, int] | None:
            row = conn.execute(q.SELECT_CALL, (task_id, call_id)).fetchone()
            if row is None:
                return None
            return codec.call_from_row(row, row[-1]), len(row[codec.HISTORY])

        found = await self._run(op)
        return None if found is None else self._remember(*found)

    async def claim_call(self, record: CallRecord) -> tuple[CallRecord, bool]:
        new = codec.call_row(stamp_new(record))
        key = (record.task_id, record.call_id)

        def op(conn: sqlite3.Connection) -> tuple[CallRecord, int, bool]:
            if new.apart is not None:
                conn.execute(q.INSERT_RESULT, q.result_params(new.apart))
            if conn.execute(q.INSERT_CALL, new.values).rowcount == 1:
                return new.record, len(new.values[codec.HISTORY]), True
            row = conn.execute(q.SELECT_CALL, key).fetchone()
            return codec.call_from_row(row, row[-1]), len(row[codec.HISTORY]), False

        record, history_length, inserted = await self._run(op, _claim_mode(record))
        return self._remember(record, history_length), inserted

    async def transition(
        self,
        task_id: str,
        call_id: str,
        *,
        expected: CallStatus,
        target: CallStatus,
        changes: Mapping[str, Any] | None = None,
        expected_attempt: int | None = None,
    ) -> CallRecord:
        key = (task_id, call_id)
        checked = check_transition(expected, target, changes)
        now = time.time()
        update = q.transition_update(
            key,
            expected=expected,
            target=target,
            changes=checked,
            now=now,
            expected_attempt=expected_attempt,
        )
        known = self._recent.get(key)
        if known is not None and (
            known[0].status is not expected
            or (expected_attempt is not None and known[0].attempt != expected_attempt)
        ):
            known = None

        def op(conn: sqlite3.Connection) -> tuple[CallRecord, int] | None:
            if update.apart is not None:
                conn.execute(q.INSERT_RESULT, q.result_params(update.apart))
            if known is not None:
                guarded = (*update.params, known[1])
                if conn.execute(update.guarded_sql, guarded).rowcount == 1:
                    return None
            rows = conn.execute(update.sql, update.params).fetchall()
            if not rows:
                status = conn.execute(q.SELECT_STATUS, key).fetchone()
                if status is None:
                    raise KeyError(key)
                raise StaleState(expected, CallStatus(status[0]))
            row = rows[0]
            apart = update.apart[1] if update.apart is not None else None
            if apart is None and row[codec.RESULT_REF] is not None:
                apart = conn.execute(q.SELECT_RESULT, (row[codec.RESULT_REF],)).fetchone()[0]
            return codec.call_from_row(row, apart), len(row[codec.HISTORY])

        done = await self._run(op, Mode.WRITE)
        if done is not None:
            return self._remember(*done)
        assert known is not None
        if update.sets_result:
            checked["result_ref"] = update.result_ref
        record = apply_checked(known[0], target=target, checked=checked, now=now)
        return self._remember(record, known[1] + update.history_growth)

    async def list_calls(
        self,
        *,
        statuses: Sequence[CallStatus] | None = None,
        task_id: str | None = None,
        limit: int = 1000,
    ) -> list[CallRecord]:
        sql, params = q.list_calls_query(statuses, task_id, limit)

        def op(conn: sqlite3.Connection) -> list[CallRecord]:
            return [codec.call_from_row(row, row[-1]) for row in conn.execute(sql, params)]

        return await self._run(op)

    async def page_calls(self, query: CallQuery) -> list[CallRecord]:
        sql, params = page_calls_query(q.CALL_SELECT, query)

        def op(conn: sqlite3.Connection) -> list[CallRecord]:
            return [codec.call_from_row(row, row[-1]) for row in conn.execute(sql, params)]

        return await self._run(op)

    async def count_calls(
        self,
        task_id: str,
        *,
        tool: str | None = None,
        statuses: Sequence[CallStatus] | None = None,
        tenant: str | None = None,
    ) -> int:
        sql, params = q.count_calls_query(task_id, tool, statuses, tenant)

        def op(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, params).fetchone()[0])

        return await self._run(op)

    async def hold_budget(self, hold: BudgetHold) -> int | None:
        counts = [q.budget_used_query(hold, tool) for tool, _ in hold.limits]

        def op(conn: sqlite3.Connection) -> int | None:
            # Counted and taken under the file's write lock: no other process takes a place
            # between the two (in an open batch, this connection holds the lock already). It
            # may join the batch: another process counts under the same lock, so only after
            # the batch commits; a write's RUNNING record commits it before its effect.
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(*q.spent_holds_query(hold))
                for index, ((sql, params), (_, limit)) in enumerate(
                    zip(counts, hold.limits, strict=True)
                ):
                    if int(conn.execute(sql, params).fetchone()[0]) >= limit:
                        full: int | None = index
                        break
                else:
                    full = None
                    conn.execute(q.UPSERT_HOLD, q.hold_params(hold))
            except BaseException:
                if own and conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if own:
                conn.execute("COMMIT")
            return full

        return await self._run(op, Mode.DEFERRED)

    # -- approvals -------------------------------------------------------------------------

    async def create_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        params = codec.approval_row(record)

        def op(conn: sqlite3.Connection) -> ApprovalRecord:
            try:
                conn.execute(q.INSERT_APPROVAL, params)
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"approval {record.id} exists") from exc
            return record

        return await self._run(op, Mode.WRITE)

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        def op(conn: sqlite3.Connection) -> ApprovalRecord | None:
            row = conn.execute(q.SELECT_APPROVAL, (approval_id,)).fetchone()
            return None if row is None else codec.approval_from_row(row)

        return await self._run(op)

    async def decide_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        by: str | None,
        note: str | None,
        at: float,
    ) -> ApprovalRecord:
        params = (check_decision(status).value, by, note, at, approval_id)

        def op(conn: sqlite3.Connection) -> ApprovalRecord:
            rows = conn.execute(q.DECIDE_APPROVAL, params).fetchall()
            if rows:
                return codec.approval_from_row(rows[0])
            row = conn.execute(q.SELECT_APPROVAL, (approval_id,)).fetchone()
            if row is None:
                raise KeyError(approval_id)
            current = codec.approval_from_row(row)
            raise not_pending(current)

        return await self._run(op, Mode.WRITE)

    async def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 1000
    ) -> list[ApprovalRecord]:
        sql, params = q.list_approvals_query(status, limit)

        def op(conn: sqlite3.Connection) -> list[ApprovalRecord]:
            return [codec.approval_from_row(row) for row in conn.execute(sql, params)]

        return await self._run(op)

    # -- agent runs ------------------------------------------------------------------------

    async def save_run(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        now = time.time()

        def op(conn: sqlite3.Connection) -> float:
            if expected_version == 0:
                if conn.execute(runs.INSERT_RUN, runs.insert_params(record, now)).rowcount:
                    return now
            else:
                params = runs.update_params(record, expected_version, now)
                row = conn.execute(runs.UPDATE_RUN, params).fetchone()
                if row is not None:
                    return float(row[0])
            found = conn.execute(runs.SELECT_RUN_VERSION, (record.run_id,)).fetchone()
            raise StaleRun(record.run_id, expected_version, None if found is None else found[0])

        created = await self._run(op, Mode.WRITE)
        return runs.stored(record, expected_version, created, now)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def op(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(runs.SELECT_RUN, (run_id,)).fetchone()
            return None if row is None else runs.run_from_row(row)

        return await self._run(op)
