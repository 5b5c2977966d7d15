"""How a store changes what it holds: the rules every `LedgerStore` applies the same way.

What it is: which requests for a call's transition a store accepts (the state machine of
`core.states` allows the move; the changes name fields a transition may set), how an accepted
transition is applied to a record, how a new record is stamped, and which decisions end a
pending approval. `MemoryStore`, `SQLiteStore` and `PostgresStore` all take them from here.
What it is not: the table of legal moves (`core.states.TRANSITIONS`), or storage: each store
reads the record and compares-and-sets it in its own way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ..core.errors import IllegalTransition
from ..core.states import CallStatus, can_transition
from .base import ApprovalRecord, ApprovalStatus, CallRecord

__all__ = ["apply_checked", "check_decision", "check_transition", "not_pending", "stamp_new"]

# Fields a transition never takes from `changes`: the key, and what the store derives.
_KEY_FIELDS = frozenset({"task_id", "call_id", "status", "history", "updated_at", "result_ref"})
_FIELDS = frozenset(CallRecord.__struct_fields__)


def check_transition(
    expected: CallStatus, target: CallStatus, changes: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Validate a transition request before any record is read; shared by every store.

    Returns:
        The changes as a new dict.

    Raises:
        IllegalTransition: the state machine does not allow `expected -> target`.
        ValueError: `changes` names a field a transition cannot change, or an unknown field.
    """
    if not can_transition(expected, target):
        raise IllegalTransition(expected, target)
    checked = dict(changes or {})
    bad = _KEY_FIELDS.intersection(checked)
    if bad:
        raise ValueError(f"a transition cannot change {sorted(bad)}")
    unknown = checked.keys() - _FIELDS
    if unknown:
        raise ValueError(f"a call record has no fields {sorted(unknown)}")
    return checked


def apply_checked(
    record: CallRecord, *, target: CallStatus, checked: dict[str, Any], now: float
) -> CallRecord:
    """The record after a transition: the changes `check_transition` returned, applied to a
    record known to be in the expected state (consumes `checked`)."""
    checked.update(status=target, updated_at=now, history=(*record.history, (target, now)))
    return msgspec.structs.replace(record, **checked)


def stamp_new(record: CallRecord, clock: Callable[[], float] = time.time) -> CallRecord:
    """A record as first written: timestamps and the first history entry (kept as they are
    when the caller stamped the record already, the clock then left alone)."""
    if record.created_at and record.history:
        return record
    now = clock()
    return msgspec.structs.replace(
        record, created_at=now, updated_at=now, history=((record.status, now),)
    )


def check_decision(status: ApprovalStatus) -> ApprovalStatus:
    """`status` when a pending request may end in it (any but pending).

    Raises:
        ValueError: it is `PENDING`: no decision (one would stamp who decided and when on a
            request that stays pending).
    """
    if status is ApprovalStatus.PENDING:
        raise ValueError("a decision is approved, denied, expired or withdrawn, not pending")
    return status


def not_pending(record: ApprovalRecord) -> ValueError:
    """The error to raise for a decision on `record`, which is decided already."""
    return ValueError(f"approval {record.id} is {record.status}, not pending")
