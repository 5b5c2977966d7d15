"""The journal: the only writer of call records. It claims a call RUNNING, moves it to its next
attempt, records its end, a refusal or a wait for approval, and marks an abandoned one
UNKNOWN_OUTCOME; each write is a compare-and-set, and one another process won first is
`LostRace` (the call then passes the gates again).

A write that must not be cut short by a cancellation (a commit may land all the same, with no
one left to end the record) is shielded, and the cancellation delivered once it is done.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Coroutine
from typing import Any

from ..core.errors import ErrorCode, NotJSON, StoreError, ToolError
from ..core.states import CallStatus
from ..core.values import MCP_CONTENT, ToolResult
from ..ledger import recovery
from ..ledger.base import ApprovalRecord, CallRecord, StaleState, current_owner
from ..observe.redact import log_exception, mask, mask_content, mask_error
from .records import (
    UNKNOWN_OUTCOME_ERROR,
    approval_pending_result,
    audit,
    binding,
    new_record,
    unrecordable,
)
from .runtime import Runtime
from .state import Attempts, CallState, Outcome

__all__ = [
    "LEDGER_UNAVAILABLE",
    "LostRace",
    "claim_running",
    "end",
    "end_interrupted",
    "give_up",
    "hold",
    "mark_unknown",
    "next_attempt",
    "refuse",
]

_log = logging.getLogger("toolkeeper")

LEDGER_UNAVAILABLE = ToolError.of(
    ErrorCode.INTERNAL_ERROR,
    "the ledger failed or cannot be reached, so the call could not be recorded; try it again later",
    retryable=True,
)
"""The refusal of a call the ledger failed to record, when running it again is safe."""

_NOT_RECORDED = frozenset(
    {ErrorCode.CALL_ID_CONFLICT, ErrorCode.CALL_IN_PROGRESS, ErrorCode.INVALID_CALL_ID}
)
"""Refusals that leave the ledger alone: the id is another call's, or cannot be a key."""


class LostRace(Exception):
    """Another process changed the call's record first; the pipeline starts over."""


async def claim_running(rt: Runtime, st: CallState, run: Attempts) -> None:
    """Write the call RUNNING (committed) before its effect may start: a first record, or the
    move of the one it has (a takeover of an abandoned call is RUNNING -> RUNNING: the
    attempt tells the one process that wins it from the others that read the same record)."""
    assert st.tool is not None
    store = rt.store()
    key = (st.call.task_id, st.call.call_id)
    deadline = run.started_at + st.tool.spec.timeout
    approval_id = st.approval.id if st.approval is not None else None
    with rt.cancel_scope(shield=True):
        try:
            if st.record is None:
                running = new_record(
                    rt,
                    st,
                    CallStatus.RUNNING,
                    attempt=run.number,
                    deadline=deadline,
                    approval_id=approval_id,
                )
                if not (await store.claim_call(running))[1]:
                    raise LostRace
                previous = None
            else:
                previous = st.record.status
                changes = _identity_changes(st) | {
                    "attempt": run.number,
                    "deadline": deadline,
                    "approval_id": approval_id,
                }
                await _move(rt, st, previous, CallStatus.RUNNING, changes, st.record.attempt)
        except StoreError:
            rt.unended[key] = False  # (it may have landed all the same, and ran nothing)
            raise
    if rt.unended:
        rt.unended.pop(key, None)  # (written now, at last)
    run.recorded = run.number
    audit(rt, st, CallStatus.RUNNING, previous=previous, attempt=run.number, first=previous is None)


async def next_attempt(rt: Runtime, st: CallState, run: Attempts, wait: float) -> None:
    """Move our RUNNING record to the next attempt, its deadline covering `wait` too: a record
    whose owner waits to retry is not abandoned. A record at another attempt was taken over
    by another process meanwhile: `LostRace`."""
    assert st.tool is not None
    changes = {"attempt": run.number + 1, "deadline": rt.clock() + wait + st.tool.spec.timeout}
    await _move(rt, st, CallStatus.RUNNING, CallStatus.RUNNING, changes, run.recorded)
    run.recorded = run.number + 1
    audit(rt, st, CallStatus.RUNNING, previous=CallStatus.RUNNING, attempt=run.number + 1)


def end(
    rt: Runtime, st: CallState, run: Attempts, outcome: Outcome
) -> Coroutine[Any, Any, ToolResult]:
    """Record how the call ended and return its result (await what this returns). Once
    RUNNING was written, the write is shielded, and a ledger that fails leaves the record
    RUNNING, given up (`give_up`): the result then says the ledger failed, as UNKNOWN_OUTCOME
    when the effect may have happened.

    Raises:
        StoreError: the ledger failed on a call with no RUNNING record (nothing to give up).
    """
    if run.recorded is None:
        return _record_end(rt, st, _final(st, outcome), run)
    return _end_running(rt, st, run, outcome)


async def _end_running(rt: Runtime, st: CallState, run: Attempts, outcome: Outcome) -> ToolResult:
    with rt.cancel_scope(shield=True):
        try:
            return await _record_end(rt, st, _final(st, outcome), run)
        except StoreError:
            give_up(rt, st, run.may_have_run)
    failed = Outcome(CallStatus.FAILED, error=LEDGER_UNAVAILABLE, unknown=run.may_have_run)
    return _result(st, _final(st, failed), run, rt.clock())


async def end_interrupted(
    rt: Runtime,
    st: CallState,
    run: Attempts,
    outcome: Outcome,
    *,
    failing: type[Exception] = StoreError,
) -> None:
    """Record the end of a call an exception (a cancellation, a `SystemExit`) is taking away,
    shielded, before it goes on up. A call written RUNNING whose end fails with `failing`
    stays RUNNING, given up; one never written lets the failure go on up."""
    with rt.cancel_scope(shield=True):
        try:
            await _record_end(rt, st, _final(st, outcome), run)
        except failing:
            if run.recorded is None:
                raise
            give_up(rt, st, run.may_have_run)


def give_up(rt: Runtime, st: CallState, may_have_run: bool) -> None:
    """A call written RUNNING whose end the ledger failed to record: it stays RUNNING, and
    `Runtime.unended` says so until a new proposal or `recover_abandoned` settles it."""
    assert st.tool is not None
    log_exception(
        _log,
        st.hidden(),
        "the end of %s could not be recorded; it stays RUNNING",
        st.tool.spec.name,
    )
    rt.unended[(st.call.task_id, st.call.call_id)] = may_have_run


async def mark_unknown(rt: Runtime, record: CallRecord) -> None:
    """End an abandoned RUNNING call UNKNOWN_OUTCOME (a compare-and-set: the process that
    wins it marks it, the others read it marked)."""
    await recovery.mark_unknown(rt.store(), record)
    rt.unended.pop((record.task_id, record.call_id), None)


async def refuse(rt: Runtime, st: CallState, error: ToolError) -> ToolResult:
    """Record a refused call as REJECTED (nothing ran) and return the refusal. A CANCELLED
    call refused when proposed again stays as it was: CANCELLED counts against budgets (it
    may have run), a refusal does not."""
    cancelled = st.record is not None and st.record.status is CallStatus.CANCELLED
    if error.code not in _NOT_RECORDED and not cancelled:
        previous = st.record.status if st.record is not None else None
        if st.record is None:
            rejected = new_record(rt, st, CallStatus.REJECTED, error=error.to_dict())
            if not (await rt.store().claim_call(rejected))[1]:
                raise LostRace
        else:
            changes: dict[str, Any] = {"error": error.to_dict(), "digest": st.request_digest}
            if st.redacted:
                changes["arguments"] = st.redacted
            await _move(rt, st, st.record.status, CallStatus.REJECTED, changes)
        audit(rt, st, CallStatus.REJECTED, previous=previous, error=error, first=previous is None)
    return ToolResult(
        call_id=st.call.call_id,
        tool=st.call.name,
        status=CallStatus.REJECTED,
        error=error,
        version=st.tool.spec.version if st.tool is not None else None,
    )


async def hold(rt: Runtime, st: CallState, reason: str, run: Attempts | None = None) -> ToolResult:
    """Ask a person to approve the call, hold its record AWAITING_APPROVAL, and tell the model
    how to get it approved. `run`: the tool asked while it ran (nothing ran, nothing to redo).

    Shielded: a request whose call was cancelled before it was recorded would wait for a
    person for nothing. When the record is not written (another process recorded the call
    first, or the ledger failed), the request is withdrawn.
    """
    try:
        with rt.cancel_scope(shield=True):
            if run is not None and run.recorded is not None:
                st.record = await rt.store().get_call(st.call.task_id, st.call.call_id)
            requested = await rt.approvals.request(
                binding(rt, st), arguments=st.redacted, reason=reason
            )
            held = await _hold_or_withdraw(rt, st, requested)
    except StoreError as exc:
        if run is None:
            raise
        # The tool ran nothing and its request is withdrawn: proposed again once the ledger
        # is back, the call runs (and asks) anew.
        if run.recorded is not None:
            give_up(rt, st, False)
        else:
            _log.error("the ledger failed on a call of %s: %s", st.call.name, exc)
        failed = Outcome(CallStatus.FAILED, error=LEDGER_UNAVAILABLE)
        return _result(st, failed, run, rt.clock())
    return held


async def _hold_or_withdraw(rt: Runtime, st: CallState, approval: ApprovalRecord) -> ToolResult:
    try:
        return await _hold(rt, st, approval)
    except Exception as exc:
        reason = (
            "a concurrent proposal of this call was recorded first"
            if isinstance(exc, LostRace)
            else "the call could not be recorded as waiting for it"
        )
        try:
            await rt.approvals.withdraw(approval.id, reason=reason)
        except StoreError as failed:  # (the ledger is down: the request stays pending)
            _log.error("approval request %s could not be withdrawn: %s", approval.id, failed)
        raise


_ASK_ANEW = "the approval request no longer fits the call (its tool changed, or it was withdrawn)"


async def _hold(rt: Runtime, st: CallState, approval: ApprovalRecord) -> ToolResult:
    if st.record is not None and st.record.status is CallStatus.AWAITING_APPROVAL:
        # A wait cannot follow a wait: the record ends the one for the request it can no
        # longer use (nothing ran), then waits for this one.
        await _end_wait(rt, st, ToolError.of(ErrorCode.APPROVAL_EXPIRED, _ASK_ANEW))
    previous = st.record.status if st.record is not None else None
    if st.record is None:
        held = new_record(rt, st, CallStatus.AWAITING_APPROVAL, approval_id=approval.id)
        if not (await rt.store().claim_call(held))[1]:
            raise LostRace
    else:
        changes = _identity_changes(st) | {"approval_id": approval.id, "error": None}
        await _move(rt, st, st.record.status, CallStatus.AWAITING_APPROVAL, changes)
    result = approval_pending_result(st, approval)
    audit(
        rt,
        st,
        CallStatus.AWAITING_APPROVAL,
        previous=previous,
        error=result.error,
        approval_id=approval.id,
        first=previous is None,
    )
    return result


async def _end_wait(rt: Runtime, st: CallState, error: ToolError) -> None:
    """Refuse a call whose record waits for an approval request it cannot use, so that it may
    wait for another (nothing ran). A record that meanwhile waited for another request (another
    process asked anew after the same read) ended that wait: its request is withdrawn too."""
    assert st.record is not None
    waited_for = st.record.approval_id
    try:
        st.record = await rt.store().transition(
            st.call.task_id,
            st.call.call_id,
            expected=CallStatus.AWAITING_APPROVAL,
            target=CallStatus.REJECTED,
            changes={"error": error.to_dict()},
        )
    except StaleState as exc:
        raise LostRace from exc
    audit(rt, st, CallStatus.REJECTED, previous=CallStatus.AWAITING_APPROVAL, error=error)
    if st.record.approval_id not in (None, waited_for):
        await rt.approvals.withdraw(st.record.approval_id, reason=error.message)


def _final(st: CallState, outcome: Outcome) -> Outcome:
    """An unknown outcome of a tool that may not be repeated is UNKNOWN_OUTCOME."""
    assert st.tool is not None
    if outcome.unknown and not st.tool.spec.retry_safe:
        details = {"cause": outcome.error.code.value} if outcome.error else {}
        error = ToolError.of(
            ErrorCode.UNKNOWN_OUTCOME, UNKNOWN_OUTCOME_ERROR.message, details=details
        )
        return Outcome(CallStatus.UNKNOWN_OUTCOME, error=error)
    return outcome


async def _record_end(rt: Runtime, st: CallState, outcome: Outcome, run: Attempts) -> ToolResult:
    """Write the end of the call (a first record, or the last move of its record) and return
    its result. Had another process taken our RUNNING record over meanwhile, its attempt is
    not ours to end (`LostRace`)."""
    assert st.tool is not None
    approval_id = st.approval.id if st.approval is not None else None
    previous = CallStatus.RUNNING if run.recorded is not None else None
    if previous is None and st.record is not None:
        previous = st.record.status
    if st.prepared is not None and st.prepared.sensitive:
        outcome = _masked(outcome, st.hidden())
    while True:  # twice at most: see NotJSON below
        error = outcome.error.to_dict() if outcome.error is not None else None
        try:
            if previous is None:
                ended = new_record(
                    rt,
                    st,
                    outcome.status,
                    attempt=run.number,
                    result=outcome.data,
                    content=outcome.content,
                    error=error,
                    effect_ref=outcome.effect_ref,
                    approval_id=approval_id,
                )
                if not (await rt.store().claim_call(ended))[1]:
                    # A concurrent proposal of this call id ended first: dedupe decides
                    # between its replay and a conflict (other arguments, tool or principal).
                    raise LostRace
            else:
                changes: dict[str, Any] = {
                    "attempt": run.number,
                    "result": outcome.data,
                    "content": outcome.content,
                    "error": error,
                    "effect_ref": outcome.effect_ref,
                }
                if run.recorded is None:
                    changes |= _identity_changes(st) | {"approval_id": approval_id}
                await _move(rt, st, previous, outcome.status, changes, run.recorded)
            break
        except NotJSON as exc:
            if outcome.content is None and (outcome.data is None or isinstance(outcome.data, str)):
                raise  # (a note is JSON: the store failed on something else)
            # The store cannot hold the result (a connector's data nested too deeply): the
            # call ran all the same, so it is recorded as it ended, a note in place of data.
            note = unrecordable(st.tool.spec.name, str(exc), None, st.hidden())
            outcome = dataclasses.replace(outcome, data=note, content=None)  # nothing shown
    finished_at = rt.clock()
    audit(
        rt,
        st,
        outcome.status,
        previous=previous,
        attempt=run.number,
        error=outcome.error,
        approval_id=approval_id,
        first=previous is None,
        duration=round((finished_at - run.started_at) * 1e6) / 1e6,
    )
    return _result(st, outcome, run, finished_at)


def _masked(outcome: Outcome, secrets: tuple[str, ...]) -> Outcome:
    """`outcome` with the call's sensitive argument values (`secrets`) masked in its data,
    content blocks, error and effect reference: what the ledger, the audit log and every
    model then get."""
    return dataclasses.replace(
        outcome,
        data=mask(outcome.data, secrets),
        content=mask_content(outcome.content, secrets),
        error=mask_error(outcome.error, secrets),
        effect_ref=mask(outcome.effect_ref, secrets),
    )


def _result(st: CallState, outcome: Outcome, run: Attempts, finished_at: float) -> ToolResult:
    """The result of a call that ran, as it ended."""
    assert st.tool is not None
    spec = st.tool.spec
    return ToolResult(
        call_id=st.call.call_id,
        tool=spec.name,
        status=outcome.status,
        data=outcome.data,
        error=outcome.error,
        version=spec.version,
        source=spec.source,
        attempt=run.number,
        started_at=run.started_at,
        finished_at=finished_at,
        effect_ref=outcome.effect_ref,
        approval_id=st.approval.id if st.approval is not None else None,
        metadata={MCP_CONTENT: outcome.content} if outcome.content else {},
        fence=spec.fence,
    )


async def _move(
    rt: Runtime,
    st: CallState,
    expected: CallStatus,
    target: CallStatus,
    changes: dict[str, Any],
    expected_attempt: int | None = None,
) -> None:
    """Change the call's record, or start over if another process changed it first."""
    try:
        await rt.store().transition(
            st.call.task_id,
            st.call.call_id,
            expected=expected,
            target=target,
            changes=changes,
            expected_attempt=expected_attempt,
        )
    except StaleState as exc:
        raise LostRace from exc


def _identity_changes(st: CallState) -> dict[str, Any]:
    """What a re-evaluated proposal may change in an existing record."""
    assert st.tool is not None
    return {
        "digest": st.request_digest,
        "arguments": st.redacted,
        "version": st.tool.spec.version,
        "effect": st.tool.spec.effect.value,
        "idempotent": st.tool.spec.idempotent,
        "owner": current_owner(),
    }
