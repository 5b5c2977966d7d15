"""Rows of the SQL stores: the column lists, and records to and from rows.

Shared by `SQLiteStore` and `PostgresStore`, which store the same tables (see
`migrations.py`) and differ only in their drivers. JSON fields are stored as compact text so
that both backends return them byte for byte as written. A result whose JSON is larger than
`RESULT_INLINE_LIMIT` is kept apart in the `results` table, keyed by its SHA-256, and the
record says so in `result_ref`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from ..core.errors import StoreError
from ..core.states import CallStatus
from .base import ApprovalRecord, ApprovalStatus, CallRecord

RESULT_INLINE_LIMIT = 256 * 1024
"""Results whose JSON text is longer than this many bytes are stored apart."""

CALL_COLUMNS = (
    "task_id",
    "call_id",
    "tool",
    "version",
    "digest",
    "arguments",
    "principal_id",
    "tenant",
    "status",
    "effect",
    "idempotent",
    "idempotency_key",
    "attempt",
    "approval_id",
    "effect_ref",
    "result",
    "result_ref",
    "error",
    "owner",
    "deadline",
    "created_at",
    "updated_at",
    "history",
)
"""Columns of `calls`, in the order of `call_row`."""
RESULT_REF = CALL_COLUMNS.index("result_ref")

CALL_SELECT = (
    "SELECT " + ", ".join(f"c.{c}" for c in CALL_COLUMNS) + ", r.data FROM calls c "
    "LEFT JOIN results r ON r.sha256 = c.result_ref"
)
"""A SELECT of every call column plus, last, the text of a result stored apart."""

APPROVAL_COLUMNS = (
    "id",
    "task_id",
    "call_id",
    "tool",
    "version",
    "principal_id",
    "digest",
    "arguments",
    "reason",
    "status",
    "created_at",
    "expires_at",
    "decided_by",
    "decided_at",
    "note",
)
"""Columns of `approvals`, in the order of `approval_row`."""


class Lifecycle(StrEnum):
    """Where a store's connections stand."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_STATUS = {s.value: s for s in CallStatus}


def _dump(value: Any) -> str:
    try:
        return _encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"a ledger field is not JSON: {exc}") from exc


def _dump_optional(value: Any) -> str | None:
    return None if value is None else _dump(value)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CallRow:
    """A record ready to write: its row, and its result body when that is stored apart."""

    record: CallRecord
    """The record as it will read back (with `result_ref` set)."""
    values: tuple[Any, ...]
    """Values of `CALL_COLUMNS`."""
    apart: tuple[str, str] | None
    """(SHA-256, JSON text) of a result stored apart."""


def _history_entry(status: CallStatus, at: float) -> str:
    # Times are finite floats, whose repr is valid JSON.
    return f'["{status.value}",{at!r}]'


def _result_columns(result: Any) -> tuple[str | None, str | None, tuple[str, str] | None]:
    """(inline text, reference, (reference, text) to store apart) of a result."""
    if result is None:
        return None, None, None
    text = _dump(result)
    # A character is at most 4 bytes of UTF-8: short texts need no encoding to be sized.
    if len(text) > RESULT_INLINE_LIMIT // 4:
        encoded = text.encode()
        if len(encoded) > RESULT_INLINE_LIMIT:
            ref = hashlib.sha256(encoded).hexdigest()
            return None, ref, (ref, text)
    return text, None, None


def call_row(record: CallRecord) -> CallRow:
    """Encode a record for `calls`, deciding where its result goes."""
    result_text, ref, apart = _result_columns(record.result)
    if ref != record.result_ref:
        record = dataclasses.replace(record, result_ref=ref)
    values = (
        record.task_id,
        record.call_id,
        record.tool,
        record.version,
        record.digest,
        _dump(record.arguments),
        record.principal_id,
        record.tenant,
        record.status.value,
        record.effect,
        int(record.idempotent),
        record.idempotency_key,
        record.attempt,
        record.approval_id,
        record.effect_ref,
        result_text,
        ref,
        _dump_optional(record.error),
        record.owner,
        record.deadline,
        record.created_at,
        record.updated_at,
        "[" + ",".join(_history_entry(s, t) for s, t in record.history) + "]",
    )
    return CallRow(record=record, values=values, apart=apart)


def call_from_row(row: Sequence[Any], apart: str | None = None) -> CallRecord:
    """Decode the `CALL_COLUMNS` of a row, given the text of a result stored apart."""
    (
        task_id,
        call_id,
        tool,
        version,
        digest,
        arguments,
        principal_id,
        tenant,
        status,
        effect,
        idempotent,
        idempotency_key,
        attempt,
        approval_id,
        effect_ref,
        result,
        result_ref,
        error,
        owner,
        deadline,
        created_at,
        updated_at,
        history,
    ) = row[: len(CALL_COLUMNS)]
    body = apart if result_ref is not None else result
    return CallRecord(
        task_id=task_id,
        call_id=call_id,
        tool=tool,
        version=version,
        digest=digest,
        arguments=json.loads(arguments),
        principal_id=principal_id,
        tenant=tenant,
        status=_STATUS[status],
        effect=effect,
        idempotent=bool(idempotent),
        idempotency_key=idempotency_key,
        attempt=attempt,
        approval_id=approval_id,
        effect_ref=effect_ref,
        result=None if body is None else json.loads(body),
        result_ref=result_ref,
        error=None if error is None else json.loads(error),
        owner=owner,
        deadline=deadline,
        created_at=created_at,
        updated_at=updated_at,
        history=tuple((_STATUS[s], t) for s, t in json.loads(history)),
    )


def approval_row(record: ApprovalRecord) -> tuple[Any, ...]:
    """Values of `APPROVAL_COLUMNS`."""
    return (
        record.id,
        record.task_id,
        record.call_id,
        record.tool,
        record.version,
        record.principal_id,
        record.digest,
        _dump(record.arguments),
        record.reason,
        record.status.value,
        record.created_at,
        record.expires_at,
        record.decided_by,
        record.decided_at,
        record.note,
    )


def approval_from_row(row: Sequence[Any]) -> ApprovalRecord:
    """Decode a row of `APPROVAL_COLUMNS`."""
    (
        id_,
        task_id,
        call_id,
        tool,
        version,
        principal_id,
        digest,
        arguments,
        reason,
        status,
        created_at,
        expires_at,
        decided_by,
        decided_at,
        note,
    ) = row
    return ApprovalRecord(
        id=id_,
        task_id=task_id,
        call_id=call_id,
        tool=tool,
        version=version,
        principal_id=principal_id,
        digest=digest,
        arguments=json.loads(arguments),
        reason=reason,
        status=ApprovalStatus(status),
        created_at=created_at,
        expires_at=expires_at,
        decided_by=decided_by,
        decided_at=decided_at,
        note=note,
    )


# Statements use `?` placeholders; PostgresStore turns them into `%s` (see `for_psycopg`).

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


# Repeats the predicate of the partial index `calls_unsettled` word for word, so that the
# query planners (SQLite's matches terms literally) may use it.
_UNSETTLED = "c.status <> 'SUCCEEDED'"


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join('?' * len(values))})"


def list_calls_query(
    statuses: Sequence[CallStatus] | None, task_id: str | None, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of `LedgerStore.list_calls`."""
    where: list[str] = []
    params: list[Any] = []
    if statuses is not None:
        if not statuses:
            where.append("1 = 0")
        else:
            where.append(_in("c.status", statuses))
            params.extend(s.value for s in statuses)
            if CallStatus.SUCCEEDED not in statuses:
                where.append(_UNSETTLED)
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
    task_id: str, tool: str | None, statuses: Sequence[CallStatus] | None
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of `LedgerStore.count_calls`."""
    sql = "SELECT COUNT(*) FROM calls WHERE task_id = ?"
    params: list[Any] = [task_id]
    if tool is not None:
        sql += " AND tool = ?"
        params.append(tool)
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
    params.append(limit)
    return sql, tuple(params)


@functools.lru_cache(maxsize=512)
def for_psycopg(sql: str) -> str:
    """The statement with psycopg's `%s` placeholders (our SQL has no `?` or `%` literals)."""
    return sql.replace("?", "%s")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """One compare-and-set transition as a single UPDATE ... RETURNING statement."""

    sql: str
    """The statement (`?` placeholders); it returns `CALL_COLUMNS`, or no row when the call
    is missing or not in the expected state."""
    params: tuple[Any, ...]
    """Its parameters."""
    apart: tuple[str, str] | None
    """(SHA-256, JSON text) of a new result stored apart: insert it first."""


# The history is a JSON array of [status, time] pairs of ASCII text; a transition appends
# one pair in place of the closing bracket, inside the UPDATE, so that the append is atomic
# with the state check and needs no read first.
_APPEND_HISTORY = "history = substr(history, 1, length(history) - 1) || ?"
_RETURNING = " RETURNING " + ", ".join(CALL_COLUMNS)


def _column_value(name: str, value: Any) -> Any:
    if name == "arguments":
        return _dump(value)
    if name == "error":
        return _dump_optional(value)
    if name == "idempotent":
        return int(value)
    return value


@functools.lru_cache(maxsize=256)
def _transition_sql(names: tuple[str, ...]) -> str:
    sets = ["status = ?", "updated_at = ?", _APPEND_HISTORY]
    for name in names:
        sets += ["result = ?", "result_ref = ?"] if name == "result" else [f"{name} = ?"]
    return (
        f"UPDATE calls SET {', '.join(sets)}"
        " WHERE task_id = ? AND call_id = ? AND status = ?" + _RETURNING
    )


def transition_update(
    key: tuple[str, str],
    *,
    expected: CallStatus,
    target: CallStatus,
    changes: dict[str, Any],
    now: float,
) -> Transition:
    """Build the statement of a transition whose request `check_transition` accepted."""
    names = tuple(sorted(changes))
    params: list[Any] = [target.value, now, "," + _history_entry(target, now) + "]"]
    apart = None
    for name in names:
        value = changes[name]
        if name == "result":
            text, ref, apart = _result_columns(value)
            params += [text, ref]
        else:
            params.append(_column_value(name, value))
    params += [*key, expected.value]
    return Transition(sql=_transition_sql(names), params=tuple(params), apart=apart)
