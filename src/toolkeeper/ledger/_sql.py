"""The SQL that `SQLiteStore` and `PostgresStore` share: statements and query builders.

Statements use `?` placeholders; `PostgresStore` turns them into `%s` with `for_psycopg`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import anyio

from ..core.states import CallStatus
from ._rows import (
    APPROVAL_COLUMNS,
    CALL_COLUMNS,
    column_value,
    history_entry,
    result_columns,
)
from .base import EVERY, ApprovalStatus, BudgetHold, check_limit


class Lifecycle(StrEnum):
    """Where a store's connections stand."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


async def open_once(store: Any) -> None:
    """Open `store` (its `_open()`) unless it is open: concurrent first callers wait for the
    one that opens it, instead of each opening connections over the others'."""
    if store._state is Lifecycle.OPEN:
        return
    if store._open_lock is None:
        store._open_lock = anyio.Lock()
    async with store._open_lock:
        if store._state is not Lifecycle.OPEN:  # another task may have opened it meanwhile
            await store._open()


CALL_SELECT = (
    "SELECT " + ", ".join(f"c.{c}" for c in CALL_COLUMNS) + ", r.data FROM calls c "
    "LEFT JOIN results r ON r.sha256 = c.result_ref"
)
"""A SELECT of every call column plus, last, the text of a result stored apart."""

INSERT_CALL = (
    f"INSERT INTO calls ({', '.join(CALL_COLUMNS)}) VALUES ({', '.join('?' * len(CALL_COLUMNS))})"
    " ON CONFLICT (task_id, call_id) DO NOTHING"
)
INSERT_RESULT = (
    "INSERT INTO results (sha256, data, size) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING"
)
SELECT_CALL = CALL_SELECT + " WHERE c.task_id = ? AND c.call_id = ?"
SELECT_STATUS = "SELECT status FROM calls WHERE task_id = ? AND call_id = ?"
SELECT_RESULT = "SELECT data FROM results WHERE sha256 = ?"
INSERT_APPROVAL = (
    f"INSERT INTO approvals ({', '.join(APPROVAL_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(APPROVAL_COLUMNS))})"
)
SELECT_APPROVAL = f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals WHERE id = ?"
DECIDE_APPROVAL = (
    "UPDATE approvals SET status = ?, decided_by = ?, note = ?, decided_at = ?"
    f" WHERE id = ? AND status = 'pending' RETURNING {', '.join(APPROVAL_COLUMNS)}"
)


def result_params(apart: tuple[str, str]) -> tuple[Any, ...]:
    """Parameters of `INSERT_RESULT`."""
    sha, text = apart
    return (sha, text, len(text.encode()))


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join('?' * len(values))})"


def _as_limit(limit: int) -> int:
    """`limit` as a LIMIT both databases take: their integers are 64-bit, and no ledger holds
    `EVERY` rows, so a larger count lists the same."""
    return min(limit, EVERY)


def list_calls_query(
    statuses: Sequence[CallStatus] | None, task_id: str | None, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of `LedgerStore.list_calls`."""
    limit = _as_limit(check_limit(limit))
    where: list[str] = []
    params: list[Any] = []
    if statuses is not None:
        if not statuses:
            where.append("1 = 0")
        else:
            where.append(_in("c.status", statuses))
            params.extend(s.value for s in statuses)
    if task_id is not None:
        where.append("c.task_id = ?")
        params.append(task_id)
    sql = CALL_SELECT
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY c.created_at, c.task_id, c.call_id LIMIT ?"
    params.append(limit)
    return sql, tuple(params)


def count_calls_query(
    task_id: str,
    tool: str | None,
    statuses: Sequence[CallStatus] | None,
    tenant: str | None = None,
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of `LedgerStore.count_calls`."""
    sql = "SELECT COUNT(*) FROM calls WHERE task_id = ?"
    params: list[Any] = [task_id]
    if tool is not None:
        sql += " AND tool = ?"
        params.append(tool)
    if tenant is not None:
        sql += " AND tenant = ?"
        params.append(tenant)
    if statuses is not None:
        if not statuses:
            sql += " AND 1 = 0"
        else:
            sql += " AND " + _in("status", statuses)
            params.extend(s.value for s in statuses)
    return sql, tuple(params)


def list_approvals_query(status: ApprovalStatus | None, limit: int) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of `LedgerStore.list_approvals`."""
    sql = f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals"
    params: list[Any] = []
    if status is not None:
        sql += " WHERE status = ?"
        params.append(status.value)
    sql += " ORDER BY created_at, id LIMIT ?"
    params.append(_as_limit(check_limit(limit)))
    return sql, tuple(params)


def spent_holds_query(hold: BudgetHold) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters that delete the holds of `hold`'s task that no longer count
    (`base.hold_counts`): expired, or superseded by their call's record. What is left is
    the holds of calls in flight, so counting them stays cheap however long the task."""
    counted = [s.value for s in hold.counted] or ["-"]
    sql = (
        "DELETE FROM budget_holds WHERE tenant = ? AND task_id = ? AND (expires_at <= ?"
        " OR EXISTS (SELECT 1 FROM calls c WHERE c.task_id = budget_holds.task_id"
        " AND c.call_id = budget_holds.call_id"
        f" AND ({_in('c.status', counted)} OR c.updated_at >= budget_holds.created_at)))"
    )
    return sql, (hold.tenant, hold.task_id, hold.created_at, *counted)


UPSERT_HOLD = (
    "INSERT INTO budget_holds (tenant, task_id, call_id, tool, created_at, expires_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, task_id, call_id) DO UPDATE SET"
    " tool = excluded.tool, created_at = excluded.created_at, expires_at = excluded.expires_at"
)


def budget_used_query(hold: BudgetHold, tool: str | None) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters that count what a budget of `hold.task_id` (of `tool`, or of the
    whole task) has used, but for `hold`'s own call: its calls in a counted state, and the
    holds that still count (`base.hold_counts`)."""
    counted = [s.value for s in hold.counted] or ["-"]
    of_tool = " AND tool = ?" if tool is not None else ""
    hold_of_tool = " AND h.tool = ?" if tool is not None else ""
    sql = (
        "SELECT (SELECT COUNT(*) FROM calls WHERE task_id = ? AND tenant = ? AND call_id <> ?"
        f" AND {_in('status', counted)}{of_tool})"
        " + (SELECT COUNT(*) FROM budget_holds h WHERE h.tenant = ? AND h.task_id = ?"
        f" AND h.call_id <> ? AND h.expires_at > ?{hold_of_tool}"
        " AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.task_id = h.task_id"
        f" AND c.call_id = h.call_id AND ({_in('c.status', counted)}"
        " OR c.updated_at >= h.created_at)))"
    )
    mine = (hold.task_id, hold.tenant, hold.call_id)
    params: list[Any] = [*mine, *counted]
    if tool is not None:
        params.append(tool)
    params += [hold.tenant, hold.task_id, hold.call_id, hold.created_at]
    if tool is not None:
        params.append(tool)
    params += counted
    return sql, tuple(params)


def hold_params(hold: BudgetHold) -> tuple[Any, ...]:
    """The parameters of `UPSERT_HOLD`."""
    return (
        hold.tenant,
        hold.task_id,
        hold.call_id,
        hold.tool,
        hold.created_at,
        hold.expires_at,
    )


@functools.lru_cache(maxsize=512)
def for_psycopg(sql: str) -> str:
    """The statement with psycopg's `%s` placeholders (our SQL has no `?` or `%` literals)."""
    return sql.replace("?", "%s")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """One compare-and-set transition as a single UPDATE statement."""

    sql: str
    """The statement (`?` placeholders, `params`); it returns `CALL_COLUMNS`, or no row when
    the call is missing or not in the expected state."""
    guarded_sql: str
    """The same update without RETURNING, guarded also by the length of the stored history
    (one more parameter after `params`). The history only grows, so when this updates a row
    the row was exactly the version whose history had that length: a store that holds that
    version can compute the new record itself instead of decoding it."""
    params: tuple[Any, ...]
    """Its parameters."""
    history_growth: int
    """How many characters the update adds to the history text."""
    sets_result: bool
    """Whether the update replaces the result."""
    result_ref: str | None
    """The new result's reference when it is stored apart."""
    apart: tuple[str, str] | None
    """(SHA-256, JSON text) of a new result stored apart: insert it first."""


# The history is a JSON array of [status, time] pairs of ASCII text; a transition appends
# one pair in place of the closing bracket, inside the UPDATE, so that the append is atomic
# with the state check and needs no read first.
_APPEND_HISTORY = "history = substr(history, 1, length(history) - 1) || ?"
_RETURNING = " RETURNING " + ", ".join(CALL_COLUMNS)


@functools.lru_cache(maxsize=256)
def _transition_sql(names: tuple[str, ...], attempt: bool) -> tuple[str, str]:
    sets = ["status = ?", "updated_at = ?", _APPEND_HISTORY]
    for name in names:
        sets += ["result = ?", "result_ref = ?"] if name == "result" else [f"{name} = ?"]
    update = f"UPDATE calls SET {', '.join(sets)} WHERE task_id = ? AND call_id = ? AND status = ?"
    if attempt:
        update += " AND attempt = ?"
    return update + _RETURNING, update + " AND length(history) = ?"


def transition_update(
    key: tuple[str, str],
    *,
    expected: CallStatus,
    target: CallStatus,
    changes: dict[str, Any],
    now: float,
    expected_attempt: int | None = None,
) -> Transition:
    """Build the statement of a transition whose request `check_transition` accepted."""
    names = tuple(sorted(changes))
    entry = "," + history_entry(target, now) + "]"
    params: list[Any] = [target.value, now, entry]
    apart = ref = None
    for name in names:
        value = changes[name]
        if name == "result":
            text, ref, apart = result_columns(value)
            params += [text, ref]
        else:
            params.append(column_value(name, value))
    params += [*key, expected.value]
    if expected_attempt is not None:
        params.append(expected_attempt)
    sql, guarded_sql = _transition_sql(names, expected_attempt is not None)
    return Transition(
        sql=sql,
        guarded_sql=guarded_sql,
        params=tuple(params),
        history_growth=len(entry) - 1,
        sets_result="result" in changes,
        result_ref=ref,
        apart=apart,
    )
