"""Records to and from rows of the SQL stores.

Shared by `SQLiteStore` and `PostgresStore`, which store the same tables (see
`migrations.py`). JSON fields are stored as compact text so that both backends return them
byte for byte as written. A result whose JSON is larger than `RESULT_INLINE_LIMIT` is kept
apart in the `results` table, keyed by its SHA-256, and the record says so in `result_ref`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import msgspec

from ..core.errors import NotJSON
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
    "content",
)
"""Columns of `calls`, in the order of `call_row`."""
RESULT_REF = CALL_COLUMNS.index("result_ref")
HISTORY = CALL_COLUMNS.index("history")

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


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_encode_fast = msgspec.json.Encoder().encode
_STATUS = {s.value: s for s in CallStatus}


def dump_json(value: Any) -> str:
    """Compact JSON text of a ledger field.

    Raises:
        NotJSON: `value` is not JSON data (NaN and infinities included), or is nested too
            deeply for the encoder.
    """
    try:
        out = _encode_fast(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        pass  # the standard encoder below says what is wrong
    else:
        # msgspec writes NaN and infinities as null: text without null held none.
        if b"null" not in out:
            return out.decode()
    try:
        return _encode(value)
    except RecursionError as exc:
        raise NotJSON("a ledger field is nested too deeply to be stored as JSON") from exc
    except (TypeError, ValueError) as exc:
        raise NotJSON(f"a ledger field is not JSON: {exc}") from exc


def _dump_optional(value: Any) -> str | None:
    return None if value is None else dump_json(value)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CallRow:
    """A record ready to write: its row, and its result body when that is stored apart."""

    record: CallRecord
    """The record as it will read back (with `result_ref` set)."""
    values: tuple[Any, ...]
    """Values of `CALL_COLUMNS`."""
    apart: tuple[str, str] | None
    """(SHA-256, JSON text) of a result stored apart."""


def history_entry(status: CallStatus, at: float) -> str:
    # Times are finite floats, whose repr is valid JSON.
    return f'["{status.value}",{at!r}]'


def result_columns(result: Any) -> tuple[str | None, str | None, tuple[str, str] | None]:
    """(inline text, reference, (reference, text) to store apart) of a result."""
    if result is None:
        return None, None, None
    text = dump_json(result)
    # A character is at most 4 bytes of UTF-8: short texts need no encoding to be sized.
    if len(text) > RESULT_INLINE_LIMIT // 4:
        encoded = text.encode()
        if len(encoded) > RESULT_INLINE_LIMIT:
            ref = hashlib.sha256(encoded).hexdigest()
            return None, ref, (ref, text)
    return text, None, None


def call_row(record: CallRecord) -> CallRow:
    """Encode a record for `calls`, deciding where its result goes."""
    result_text, ref, apart = result_columns(record.result)
    if ref != record.result_ref:
        record = msgspec.structs.replace(record, result_ref=ref)
    values = (
        record.task_id,
        record.call_id,
        record.tool,
        record.version,
        record.digest,
        dump_json(record.arguments),
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
        "[" + ",".join(history_entry(s, t) for s, t in record.history) + "]",
        _dump_optional(record.content),
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
        content,
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
        content=None if content is None else tuple(json.loads(content)),
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
        dump_json(record.arguments),
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


def column_value(name: str, value: Any) -> Any:
    """The column value of one field of `CallRecord` other than `result` and `status`."""
    if name == "arguments":
        return dump_json(value)
    if name in ("error", "content"):
        return _dump_optional(value)
    if name == "idempotent":
        return int(value)
    return value
