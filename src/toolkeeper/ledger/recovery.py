"""Crash recovery: calls left RUNNING by a process that is gone.

A call is written RUNNING before its side effect starts. If the process that claimed it dies
before writing the end, nobody knows whether the effect happened. Such a call of a tool that
is not idempotent becomes UNKNOWN_OUTCOME, to be reconciled (by the tool's own status check,
or by a person: `toolkeeper ledger unknown`) and never blindly replayed. A call of an
idempotent tool stays RUNNING: running it again is safe, and the executor takes it over when
the call is proposed again.
"""

from __future__ import annotations

import time
from typing import Any

from ..core.errors import ErrorCode, ToolError
from ..core.states import CallStatus
from .base import CallRecord, LedgerStore, StaleState, current_owner, is_abandoned

__all__ = [
    "UNKNOWN_OUTCOME_ERROR",
    "mark_unknown",
    "recover_abandoned",
    "settle",
]

UNKNOWN_OUTCOME_ERROR = ToolError.of(
    ErrorCode.UNKNOWN_OUTCOME,
    "The call was interrupted while it ran, so it is not known whether it took effect. "
    "It will not be run again automatically; its outcome is being checked.",
    retryable=False,
)
"""The error recorded on a call found abandoned."""

_SCAN_LIMIT = 1_000_000


async def recover_abandoned(
    store: LedgerStore,
    *,
    now: float | None = None,
    given_up: dict[tuple[str, str], bool] | None = None,
) -> list[CallRecord]:
    """Mark the abandoned RUNNING calls of non-idempotent tools UNKNOWN_OUTCOME.

    Safe to run in several processes at once: each change is a compare-and-set, and a call
    another process moved first is skipped.

    Args:
        store: An open ledger store.
        now: The current wall-clock time (epoch seconds); `time.time()` when None.
        given_up: The calls this process gave up (`Runtime.unended`: written RUNNING, they
            could not be ended because the ledger failed), by (task, call): whether the
            effect may have happened. Their owner is alive, so they would never count as
            abandoned: one whose effect may have happened is marked too. Entries marked, or
            whose record moved on, are removed.

    Returns:
        The records this call changed, as stored.
    """
    now = time.time() if now is None else now
    mine = given_up if given_up is not None else {}
    owner = current_owner()
    changed: list[CallRecord] = []
    running = await store.list_calls(statuses=[CallStatus.RUNNING], limit=_SCAN_LIMIT)
    for key in mine.keys() - {(r.task_id, r.call_id) for r in running if r.owner == owner}:
        del mine[key]  # its record moved on
    for record in running:
        key = (record.task_id, record.call_id)
        may_have_run = record.owner == owner and mine.get(key, False)
        if record.idempotent or not (may_have_run or is_abandoned(record, now=now)):
            continue
        marked = await mark_unknown(store, record)
        if marked is not None:
            changed.append(marked)
        mine.pop(key, None)
    return changed


async def mark_unknown(store: LedgerStore, record: CallRecord) -> CallRecord | None:
    """An abandoned call's RUNNING -> UNKNOWN_OUTCOME, unless another process moved it first
    (None): ended it, or wrote another attempt (its owner, found alive, retrying; or another
    process taking it over), which `record` was not judged abandoned on."""
    try:
        return await store.transition(
            record.task_id,
            record.call_id,
            expected=CallStatus.RUNNING,
            target=CallStatus.UNKNOWN_OUTCOME,
            changes={"error": UNKNOWN_OUTCOME_ERROR.to_dict()},
            expected_attempt=record.attempt,
        )
    except StaleState:
        return None


async def settle(
    store: LedgerStore,
    task_id: str,
    call_id: str,
    *,
    succeeded: bool,
    by: str,
    note: str,
    result: Any = None,
    effect_ref: str | None = None,
) -> CallRecord:
    """Record what a person found out about an UNKNOWN_OUTCOME call: it took effect
    (SUCCEEDED, with `result` as its data) or it did not (FAILED). The call is never run;
    proposed again, it replays what is recorded here. The record keeps who decided (its
    `owner` becomes `person:BY`) and the note (in the error of a FAILED call, as the
    `effect_ref` of a SUCCEEDED one unless one is given).

    Raises:
        KeyError: no such call.
        ValueError: the call's outcome is not unknown (any more), or `by`/`note` is blank.
    """
    if not by.strip() or not note.strip():
        raise ValueError("settling a call needs who decided (by) and what they found (note)")
    record = await store.get_call(task_id, call_id)
    if record is None:
        raise KeyError(f"no call {call_id!r} in task {task_id!r}")
    if record.status is not CallStatus.UNKNOWN_OUTCOME:
        raise ValueError(
            f"call {call_id!r} is {record.status.value}, not UNKNOWN_OUTCOME: nothing to settle"
        )
    error = (
        None
        if succeeded
        else ToolError.of(
            ErrorCode.TOOL_ERROR,
            f"the call did not take effect (found by {by}: {note})",
            details={"settled_by": by, "note": note},
        ).to_dict()
    )
    try:
        return await store.transition(
            task_id,
            call_id,
            expected=CallStatus.UNKNOWN_OUTCOME,
            target=CallStatus.SUCCEEDED if succeeded else CallStatus.FAILED,
            changes={
                "result": result if succeeded else None,
                "error": error,
                # Who decided, kept with the call itself (not every ledger has an audit file).
                "owner": f"person:{by}",
                "effect_ref": effect_ref if effect_ref or not succeeded else f"settled: {note}",
            },
        )
    except StaleState as exc:
        raise ValueError(f"call {call_id!r} was settled meanwhile") from exc
