"""The PostgreSQL ledger store: for several processes or hosts sharing one ledger.

What it is: `LedgerStore` on psycopg 3 (async) with a small connection pool. Exactly-once
holds across processes through the database itself: a claim is `INSERT ... ON CONFLICT DO
NOTHING` on the (task_id, call_id) primary key, a transition is a compare-and-set `UPDATE ...
WHERE status = expected AND rev = read revision` (the row lock makes concurrent writers take
turns, and all but one find the guard false), and an approval is decided only while `pending`.
Every statement runs in autocommit: no transaction is held open across a round trip.

What it is not: a connection manager for the rest of the application; it owns its pool.
Needs the `postgres` extra: `pip install "toolkeeper[postgres]"`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio

from ..core.extras import MissingExtra

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("postgres", "PostgresStore (a postgresql:// ledger)") from exc

from ..core.errors import ConfigurationError, StoreError
from ..core.states import CallStatus
from . import _rows as codec
from . import _runs as runs
from . import _sql as q
from .base import (
    ApprovalRecord,
    ApprovalStatus,
    BudgetHold,
    CallRecord,
    RunRecord,
    StaleRun,
    StaleState,
)
from .keys import from_environment, parse_key
from .migrations import (
    INSERT_VERSION,
    SCHEMA_VERSION_DDL,
    SELECT_VERSIONS,
    missing,
    require_current,
)
from .pages import CallQuery, page_calls_query
from .pins import PostgresPins
from .transitions import check_decision, check_transition, not_pending, stamp_new

__all__ = ["PostgresStore"]

_log = logging.getLogger("toolkeeper")
_T = TypeVar("_T")

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_SELECT_CALL = q.for_psycopg(q.SELECT_CALL)
_INSERT_CALL = q.for_psycopg(q.INSERT_CALL)
_INSERT_RESULT = q.for_psycopg(q.INSERT_RESULT)
_SELECT_STATUS = q.for_psycopg(q.SELECT_STATUS)
_SELECT_RESULT = q.for_psycopg(q.SELECT_RESULT)
_INSERT_APPROVAL = q.for_psycopg(q.INSERT_APPROVAL)
_SELECT_APPROVAL = q.for_psycopg(q.SELECT_APPROVAL)
_DECIDE_APPROVAL = q.for_psycopg(q.DECIDE_APPROVAL)
_INSERT_VERSION = q.for_psycopg(INSERT_VERSION)
_INSERT_RUN = q.for_psycopg(runs.INSERT_RUN)
_UPDATE_RUN = q.for_psycopg(runs.UPDATE_RUN)
_SELECT_RUN = q.for_psycopg(runs.SELECT_RUN)
_SELECT_RUN_VERSION = q.for_psycopg(runs.SELECT_RUN_VERSION)

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


def _lock_key(schema: str) -> int:
    digest = hashlib.sha256(f"toolkeeper.ledger:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_PASSWORD = re.compile(
    r"^[^:/?#]+://[^@/?#]*?:([^@/?#]*)@"  # postgresql://user:PASSWORD@host
    r"|[?&]password=([^&#]*)"  # ...?password=PASSWORD
    r"|\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)"  # password=PASSWORD host=...
)


def _reason(exc: psycopg.Error, url: str) -> str:
    """What went wrong, on one line (what a command prints): the server's message without the
    statement excerpt psycopg adds below it, or libpq's, whose hint follows on another line.

    A password written in `url` is masked: libpq quotes the part of a URL it cannot parse
    (a bad percent-escape in the password, an unclosed IPv6 bracket: the whole URL)."""
    reason = exc.diag.message_primary or " ".join(str(exc).split())
    for match in _PASSWORD.finditer(url):
        secret = next((group for group in match.groups() if group), "")
        if len(secret) >= 4:  # (a shorter one would mask letters of the message)
            reason = reason.replace(secret, "***")
    return reason


class _Lost(StoreError):
    """The connection handed out had been closed by the server (a restart, a failover): what
    was sent did not run, unless the server went away while running it."""


class PostgresStore(PostgresPins):
    """`LedgerStore` in a PostgreSQL database.

    Use one instance per event loop (its pool belongs to the loop that opened it); open it
    before use, or use it as an async context manager.

    Args:
        url: A libpq connection string or URL (`postgresql://user@host:5432/db`).
        schema: The schema holding the tables, created when missing; the server's
            `search_path` default (usually `public`) when None. Lets several ledgers share one
            database.
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens (concurrent operations beyond it wait).
        timeout: Seconds to wait for a connection before failing with `StoreError`; when
            `open` migrates the schema, also the most it waits for the locks that takes.
        synchronous_commit: Whether a commit waits for the server to flush its WAL to disk.
            False (`synchronous_commit=off`) saves that flush on every write (about 0.4 ms
            each here): a crash of this process still loses nothing, but a crash of the
            database server or its host may lose the last fraction of a second of writes,
            like SQLite's `synchronous=NORMAL`. Keep True when in doubt.
        create: When False, `open` refuses a database (or schema) that holds no ledger
            (`StoreError`) instead of creating its tables: what a command that only inspects
            a ledger wants, where a mistyped database name would otherwise read as empty. It
            also refuses a ledger an older toolkeeper wrote instead of upgrading its schema.
        check_after: Seconds a pooled connection may sit idle before it is checked (an empty
            query) when taken: a connection the server dropped meanwhile is replaced rather
            than failing an operation. 0 checks every time (one more round trip each).
        digest_key: The key of the ledger's digests (32 characters or more), the same for
            every process on it; None takes `TOOLKEEPER_DIGEST_KEY` or
            `TOOLKEEPER_DIGEST_KEY_FILE` (`toolkeeper.ledger.keys`).

    Raises:
        ConfigurationError: `schema` is not a plain lower-case SQL identifier, or
            `digest_key` is too short.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
        synchronous_commit: bool = True,
        create: bool = True,
        check_after: float = 1.0,
        digest_key: str | bytes | None = None,
    ) -> None:
        if schema is not None and not _IDENTIFIER.fullmatch(schema):
            raise ConfigurationError(f"not a plain SQL schema name: {schema!r}")
        self._digest_key = None if digest_key is None else parse_key(digest_key, "digest_key=")
        self.url = url
        self.schema = schema
        self.create = create
        self._timeout = timeout
        options = [] if synchronous_commit else ["-c synchronous_commit=off"]
        if schema is not None:
            options.append(f"-c search_path={schema}")
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if options:
            self._kwargs["options"] = " ".join(options)
        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            kwargs=self._kwargs,
            check=self._check,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
        )
        self._check_after = check_after
        self._max_size = max_size
        self._idle_since: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()
        self._state = q.Lifecycle.NEW
        self._open_lock: anyio.Lock | None = None

    async def _check(self, conn: Conn) -> None:
        """Before a pooled connection is used: one that sat idle `check_after` seconds or more
        is asked whether it still works (an empty query), and replaced if not. The server may
        have dropped it meanwhile (a restart, a failover, an idle timeout), and the operation
        it failed could be the write of a call's end, after its effect. One just returned is
        not asked: the round trip cost a third of a write call (1.3 ms to 1.7 ms here)."""
        since = self._idle_since.pop(conn, None)
        if since is None or time.monotonic() - since >= self._check_after:
            await AsyncConnectionPool.check_connection(conn)

    @property
    def pool_size(self) -> int:
        """The most connections it opens at once (`max_size`)."""
        return self._max_size

    def digest_key(self) -> bytes:
        """The key of this ledger's digests (`ledger.keys`): `digest_key=`, else
        `TOOLKEEPER_DIGEST_KEY` or `TOOLKEEPER_DIGEST_KEY_FILE`; every process on the ledger,
        on every host, must be given the same one.

        Raises:
            ConfigurationError: none is given, or it is too short or cannot be read.
        """
        if self._digest_key is None:
            self._digest_key = from_environment(f"the PostgreSQL ledger {self!r}")
        return self._digest_key

    def __repr__(self) -> str:
        # Never the URL itself: it may hold a password.
        try:
            info = conninfo_to_dict(self.url)
        except psycopg.Error:
            info = {}
        where = f"{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"
        schema = f", schema={self.schema!r}" if self.schema else ""
        return f"PostgresStore({where!r}{schema})"

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
        """Connect and apply missing migrations. Idempotent.

        A ledger already at this toolkeeper's version is only read, so the user needs no
        right to create anything (its owner made the tables, with `create` on).

        Raises:
            StoreError: the server is unreachable or refuses, the user may not create the
                tables that are missing, `create` is False and it holds no ledger or one to
                upgrade, or the store was closed.
        """
        await q.open_once(self)

    async def _open(self) -> None:
        if self._state is q.Lifecycle.CLOSED:
            raise StoreError("the ledger store is closed")
        # One plain connection first: it fails fast and quietly when the server is away
        # (the pool would retry in the background and log), and it migrates the schema.
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, connect_timeout=max(2, round(self._timeout)), **self._kwargs
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the PostgreSQL ledger: {_reason(exc, self.url)}"
            ) from exc
        try:
            await self._migrate(conn)
        except pg_errors.LockNotAvailable as exc:
            raise StoreError(
                f"cannot migrate the PostgreSQL ledger at {self!r}: waited {self._timeout:g} s "
                "for a lock another session holds (another process migrating it, or a "
                "transaction left open); open it again once that ends"
            ) from exc
        except pg_errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"cannot create or upgrade the ledger's tables at {self!r}: "
                f"{_reason(exc, self.url)}; open it once as a user that may (the database's or "
                "schema's owner)"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot migrate the PostgreSQL ledger: {_reason(exc, self.url)}"
            ) from exc
        finally:
            await conn.close()
        try:
            await self._pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as exc:
            await self._pool.close()
            self._state = q.Lifecycle.CLOSED
            raise StoreError(
                f"cannot connect to the PostgreSQL ledger: {_reason(exc, self.url)}"
            ) from exc
        self._state = q.Lifecycle.OPEN

    async def _applied(self, conn: Conn) -> list[int] | None:
        """The versions `schema_version` holds; None when there is no such table."""
        name = f"{self.schema}.schema_version" if self.schema else "schema_version"
        cur = await conn.execute("SELECT to_regclass(%s)", (name,))
        found = await cur.fetchone()
        if found is None or found[0] is None:
            return None
        cur = await conn.execute(SELECT_VERSIONS)
        return [row[0] for row in await cur.fetchall()]

    async def _migrate(self, conn: Conn) -> None:
        # A ledger already at this version is only read: a role that may use its tables but
        # not create any (what an operator gives a gateway) opens it.
        applied = await self._applied(conn)
        if applied is not None and not missing(applied):
            return
        async with conn.transaction():
            # A step waiting for a table's lock makes every statement on that table queue
            # behind it, and the lock may be held for ever (a session left in a transaction).
            await conn.execute(
                "SELECT set_config('lock_timeout', %s, true)", (f"{round(self._timeout * 1000)}ms",)
            )
            # One lock per schema: two processes opening at once take turns.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.schema or ""),))
            if not self.create:
                found = await self._applied(conn)
                if found is None:
                    where = f"schema {self.schema!r}" if self.schema else "this database"
                    raise StoreError(
                        f"no ledger in {where} at {self!r}: it holds no toolkeeper tables "
                        "(check the database and schema names)"
                    )
                require_current(found)  # (or upgraded meanwhile by another process)
                return
            if self.schema is not None and not await self._schema_exists(conn):
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            # (Read again through a statement that takes the table's lock: the lookup by name
            # may not see a table another process made while this one waited.)
            await conn.execute(SCHEMA_VERSION_DDL)
            cur = await conn.execute(SELECT_VERSIONS)
            applied = [row[0] for row in await cur.fetchall()]
            for step in missing(applied):
                for statement in step.statements:
                    await conn.execute(statement)
                await conn.execute(_INSERT_VERSION, (step.version, step.name, time.time()))

    async def _schema_exists(self, conn: Conn) -> bool:
        # Asked first: CREATE SCHEMA IF NOT EXISTS needs the right to create schemas even when
        # the schema exists (one an operator made and let this role create tables in).
        cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
        return await cur.fetchone() is not None

    async def aclose(self) -> None:
        """Close the pool. Idempotent."""
        self._state = q.Lifecycle.CLOSED
        await self._pool.close()

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Conn]:
        if self._state is not q.Lifecycle.OPEN:
            raise StoreError(f"the ledger store is {self._state}, not open")
        try:
            async with self._pool.connection() as conn:
                try:
                    yield conn
                except psycopg.Error as exc:
                    if conn.broken:
                        raise _Lost(f"PostgreSQL ledger error: {exc}") from exc
                    raise
                finally:
                    self._idle_since[conn] = time.monotonic()  # (see `_check`)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL ledger error: {exc}") from exc

    async def _again(self, operation: Callable[[], Awaitable[_T]]) -> _T:
        """`operation`, run again on another connection when the server had closed the one
        it was given (a restart or failover under steady traffic: connections used within
        `check_after` are not checked first). Each pooled connection can be dead at most
        once, so `max_size` tries reach a live one; the pool drops the broken ones."""
        for _ in range(self._max_size):
            try:
                return await operation()
            except _Lost as exc:
                _log.warning("a pooled ledger connection was closed by the server: %s", exc)
        return await operation()

    async def _fetch_call(self, conn: Conn, key: tuple[str, str]) -> CallRecord | None:
        cur = await conn.execute(_SELECT_CALL, key)
        row = await cur.fetchone()
        return None if row is None else codec.call_from_row(row, row[-1])

    # -- calls -----------------------------------------------------------------------------

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        return await self._again(lambda: self._get_call(task_id, call_id))

    async def _get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        async with self._conn() as conn:
            return await self._fetch_call(conn, (task_id, call_id))

    async def claim_call(self, record: CallRecord) -> tuple[CallRecord, bool]:
        return await self._again(lambda: self._claim_call(record))

    async def _claim_call(self, record: CallRecord) -> tuple[CallRecord, bool]:
        new = codec.call_row(stamp_new(record))
        key = (record.task_id, record.call_id)
        async with self._conn() as conn:
            if new.apart is not None:
                await conn.execute(_INSERT_RESULT, q.result_params(new.apart))
            cur = await conn.execute(_INSERT_CALL, new.values)
            if cur.rowcount == 1:
                return new.record, True
            existing = await self._fetch_call(conn, key)
        if existing is None:  # pragma: no cover - records are never deleted
            raise StoreError(f"call {key} conflicted but cannot be read")
        return existing, False

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
        update = q.transition_update(
            key,
            expected=expected,
            target=target,
            changes=check_transition(expected, target, changes),
            now=time.time(),
            expected_attempt=expected_attempt,
        )
        # (Run again after a lost connection, a compare-and-set that did land is StaleState:
        # the pipeline then replays the record it wrote.)
        return await self._again(lambda: self._update(key, update, expected))

    async def _update(
        self, key: tuple[str, str], update: q.Transition, expected: CallStatus
    ) -> CallRecord:
        async with self._conn() as conn:
            if update.apart is not None:
                await conn.execute(_INSERT_RESULT, q.result_params(update.apart))
            cur = await conn.execute(q.for_psycopg(update.sql), update.params)
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(_SELECT_STATUS, key)
                status = await cur.fetchone()
                if status is None:
                    raise KeyError(key)
                raise StaleState(expected, CallStatus(status[0]))
            apart = update.apart[1] if update.apart is not None else None
            if apart is None and row[codec.RESULT_REF] is not None:
                cur = await conn.execute(_SELECT_RESULT, (row[codec.RESULT_REF],))
                found = await cur.fetchone()
                apart = None if found is None else found[0]
        return codec.call_from_row(row, apart)

    async def list_calls(
        self,
        *,
        statuses: Sequence[CallStatus] | None = None,
        task_id: str | None = None,
        limit: int = 1000,
    ) -> list[CallRecord]:
        sql, params = q.list_calls_query(statuses, task_id, limit)
        async with self._conn() as conn:
            cur = await conn.execute(q.for_psycopg(sql), params)
            return [codec.call_from_row(row, row[-1]) for row in await cur.fetchall()]

    async def page_calls(self, query: CallQuery) -> list[CallRecord]:
        sql, params = page_calls_query(q.CALL_SELECT, query)
        async with self._conn() as conn:
            cur = await conn.execute(q.for_psycopg(sql), params)
            return [codec.call_from_row(row, row[-1]) for row in await cur.fetchall()]

    async def count_calls(
        self,
        task_id: str,
        *,
        tool: str | None = None,
        statuses: Sequence[CallStatus] | None = None,
        tenant: str | None = None,
    ) -> int:
        sql, params = q.count_calls_query(task_id, tool, statuses, tenant)
        async with self._conn() as conn:
            cur = await conn.execute(q.for_psycopg(sql), params)
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    async def hold_budget(self, hold: BudgetHold) -> int | None:
        return await self._again(lambda: self._hold_budget(hold))

    async def _hold_budget(self, hold: BudgetHold) -> int | None:
        counts = [q.budget_used_query(hold, tool) for tool, _ in hold.limits]
        async with self._conn() as conn, conn.transaction():
            # One lock per task: every process counts and takes a place in turn (a record
            # written meanwhile counts itself, in place of its call's hold, in one snapshot).
            key = _lock_key(f"budget\x00{hold.tenant}\x00{hold.task_id}")
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            spent, spent_params = q.spent_holds_query(hold)
            await conn.execute(q.for_psycopg(spent), spent_params)
            for index, ((sql, params), (_, limit)) in enumerate(
                zip(counts, hold.limits, strict=True)
            ):
                cur = await conn.execute(q.for_psycopg(sql), params)
                row = await cur.fetchone()
                if row is not None and int(row[0]) >= limit:
                    return index
            await conn.execute(q.for_psycopg(q.UPSERT_HOLD), q.hold_params(hold))
        return None

    # -- approvals -------------------------------------------------------------------------

    async def create_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        async with self._conn() as conn:
            try:
                await conn.execute(_INSERT_APPROVAL, codec.approval_row(record))
            except pg_errors.UniqueViolation as exc:
                raise ValueError(f"approval {record.id} exists") from exc
        return record

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        async with self._conn() as conn:
            cur = await conn.execute(_SELECT_APPROVAL, (approval_id,))
            row = await cur.fetchone()
        return None if row is None else codec.approval_from_row(row)

    async def decide_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        by: str | None,
        note: str | None,
        at: float,
    ) -> ApprovalRecord:
        async with self._conn() as conn:
            decided = (check_decision(status).value, by, note, at, approval_id)
            cur = await conn.execute(_DECIDE_APPROVAL, decided)
            row = await cur.fetchone()
            if row is not None:
                return codec.approval_from_row(row)
            cur = await conn.execute(_SELECT_APPROVAL, (approval_id,))
            row = await cur.fetchone()
        if row is None:
            raise KeyError(approval_id)
        current = codec.approval_from_row(row)
        raise not_pending(current)

    async def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 1000
    ) -> list[ApprovalRecord]:
        sql, params = q.list_approvals_query(status, limit)
        async with self._conn() as conn:
            cur = await conn.execute(q.for_psycopg(sql), params)
            return [codec.approval_from_row(row) for row in await cur.fetchall()]

    # -- agent runs ------------------------------------------------------------------------

    async def save_run(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        now = time.time()
        async with self._conn() as conn:
            if expected_version == 0:
                cur = await conn.execute(_INSERT_RUN, runs.insert_params(record, now))
                if cur.rowcount == 1:
                    return runs.stored(record, 0, now, now)
            else:
                params = runs.update_params(record, expected_version, now)
                cur = await conn.execute(_UPDATE_RUN, params)
                row = await cur.fetchone()
                if row is not None:
                    return runs.stored(record, expected_version, float(row[0]), now)
            cur = await conn.execute(_SELECT_RUN_VERSION, (record.run_id,))
            found = await cur.fetchone()
        raise StaleRun(record.run_id, expected_version, None if found is None else found[0])

    async def get_run(self, run_id: str) -> RunRecord | None:
        async with self._conn() as conn:
            cur = await conn.execute(_SELECT_RUN, (run_id,))
            row = await cur.fetchone()
        return None if row is None else runs.run_from_row(row)
