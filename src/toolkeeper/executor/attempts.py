"""Steps 8-11 of the pipeline: run an admitted call's attempts and have the journal record them.

A call with side effects is written RUNNING (committed) before its connector is invoked; a
read-only call is written once, when it ends. Each attempt runs in one anyio cancel scope,
cancelled when the tool's timeout has passed (`deadlines`). A failed attempt is retried only
if its error is retryable AND the tool is read-only or idempotent (or nothing was sent at
all), as the `RetryPolicy` allows.
A call whose effect may or may not have happened ends UNKNOWN_OUTCOME and is never replayed
blindly.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel

from ..core.connector import ToolOutput, UnrecordableResult, UpstreamUnavailable
from ..core.errors import ErrorCode, ToolError
from ..core.signals import ApprovalRequired, OutcomeUnknown, RetryLater, ToolFailed
from ..core.states import CallStatus
from ..core.values import CallContext, ToolResult
from ..observe.redact import log_exception, mask
from ..schema.canonical import safe_text
from ..schema.from_callable import NOT_JSON, json_data
from . import journal
from .journal import LostRace
from .records import unrecordable
from .runtime import Runtime, idempotency_key
from .state import Attempts, CallState, Outcome

__all__ = ["run"]

_log = logging.getLogger("toolkeeper")


async def run(rt: Runtime, st: CallState) -> ToolResult:
    """Run an admitted call to its end and record it; always returns its result.

    Raises:
        LostRace: another process recorded the call first.
        StoreError: the ledger failed before the call could have had an effect.
    """
    assert st.tool is not None
    # A takeover, or a cancelled call run again, goes on counting the call's attempts.
    record = st.record
    again = record is not None and (st.takeover or record.status is CallStatus.CANCELLED)
    number = (record.attempt if record is not None and again else 0) + 1
    run = Attempts(number, rt.clock())
    st.idempotency_key = idempotency_key(st.call.task_id, st.call.call_id)
    if st.tool.spec.has_side_effects:
        await journal.claim_running(rt, st, run)
    try:
        outcome = await _attempts(rt, st, run)
        if outcome.status is CallStatus.AWAITING_APPROVAL:
            return await journal.hold(rt, st, outcome.approval_reason or "the tool asked", run)
    except anyio.get_cancelled_exc_class():
        # The cancellation is what the caller must get: a record the ledger fails to end
        # stays RUNNING, given up.
        await journal.end_interrupted(rt, st, run, _cancelled(run))
        raise
    except LostRace:
        raise  # another process recorded the call first: the pipeline starts over
    except Exception:  # a fault of ours after RUNNING was written: the call still gets its end
        log_exception(
            _log, st.hidden(), "an internal error stopped %s while it ran", st.tool.spec.name
        )
        outcome = run.last if run.last is not None and not run.attempting else _broken(run)
    except BaseException as exc:
        # KeyboardInterrupt, or what a tool raised that is no Exception (SystemExit from its
        # argparse or sys.exit): it goes on up, once the call's record has its end (left
        # RUNNING, every proposal of the call id would wait for a recovery that a process
        # that lives on never runs).
        if run.recorded is not None:
            interrupted = Outcome(
                CallStatus.FAILED,
                error=ToolError.of(
                    ErrorCode.TOOL_ERROR,
                    f"{st.tool.spec.name} was interrupted",
                    details={"exception": type(exc).__name__},
                ),
                unknown=run.may_have_run,
            )
            await journal.end_interrupted(rt, st, run, interrupted, failing=Exception)
        raise
    return await journal.end(rt, st, run, outcome)


async def _attempts(rt: Runtime, st: CallState, run: Attempts) -> Outcome:
    """Attempt the call until an attempt succeeds, asks for approval, or may not be retried."""
    if run.recorded is not None:
        await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled meanwhile: nothing ran
    trace = st.trace
    while True:
        run.attempting = True
        try:
            outcome = run.last = await attempt(rt, st, run.number)
        except BaseException:
            if trace is not None:
                trace.attempt_ended(run.number, CallStatus.CANCELLED, None)
            raise
        run.attempting = False
        if trace is not None:
            trace.attempt_ended(run.number, outcome.status, outcome.error)
        if outcome.status is CallStatus.AWAITING_APPROVAL:
            return outcome
        run.sent = run.sent or not outcome.nothing_sent
        wait = None if outcome.status is CallStatus.SUCCEEDED else _retry_wait(rt, st, outcome, run)
        if wait is None:
            return outcome
        if run.recorded is not None:
            await journal.next_attempt(rt, st, run, wait)
        await _pause(rt, wait)
        if rt.draining:
            return outcome  # (the record ends with the attempt that ran last)
        run.number += 1


async def attempt(rt: Runtime, st: CallState, number: int) -> Outcome:
    """Invoke the tool once, within its timeout, and say how that ended."""
    assert st.tool is not None and st.validated is not None
    spec = st.tool.spec
    trace = st.trace
    headers = trace.attempt_started(number) if trace is not None else None
    ctx = CallContext(
        call_id=st.call.call_id,
        task_id=st.call.task_id,
        tool=spec.name,
        version=spec.version,
        principal=st.principal,
        attempt=number,
        deadline=time.monotonic() + spec.timeout,
        idempotency_key=st.idempotency_key,
        arguments=st.validated,
        approval_id=st.approval.id if st.approval is not None else None,
        trace=headers,
        requests=trace,
    )
    scope = rt.cancel_scope()
    try:
        with scope:
            watched = rt.deadlines.watch(scope, rt.loop_clock() + spec.timeout)
            try:
                value = await st.tool.connector.invoke(spec, st.validated, ctx)
            finally:
                rt.deadlines.let_go(watched, scope)
        if scope.cancelled_caught:
            return _timed_out(spec.name, spec.timeout, number)
    except TimeoutError:
        # The tool's own timeout (a socket's, say), not ours: its request may have left.
        error = ToolError.of(
            ErrorCode.TOOL_ERROR,
            f"{spec.name} timed out waiting for the service it calls",
            retryable=True,
        )
        return Outcome(CallStatus.FAILED, error=error, unknown=True)
    except ToolFailed as exc:
        error = ToolError.of(
            exc.code or ErrorCode.TOOL_ERROR,
            _said(st, exc.message),
            retryable=exc.retryable,
            details=mask(_details(spec.name, exc.details), st.hidden()),
        )
        return Outcome(CallStatus.FAILED, error=error)
    except RetryLater as exc:
        error = ToolError.of(
            ErrorCode.TOOL_ERROR, _said(st, exc.reason), retryable=True, retry_after=exc.after
        )
        return Outcome(CallStatus.FAILED, error=error)
    except UpstreamUnavailable as exc:
        error = ToolError.of(ErrorCode.UPSTREAM_UNAVAILABLE, _said(st, exc.reason))
        return Outcome(CallStatus.FAILED, error=error, nothing_sent=True)
    except OutcomeUnknown as exc:
        error = ToolError.of(ErrorCode.UPSTREAM_UNAVAILABLE, _said(st, exc.reason), retryable=True)
        return Outcome(CallStatus.FAILED, error=error, unknown=True)
    except UnrecordableResult as exc:
        note = unrecordable(spec.name, exc.reason, exc.what, st.hidden())
        return Outcome(CallStatus.SUCCEEDED, data=note)
    except ApprovalRequired as exc:
        if ctx.approval_id is not None:
            error = ToolError.of(ErrorCode.TOOL_ERROR, "the tool asked for approval again")
            return Outcome(CallStatus.FAILED, error=error)
        return Outcome(CallStatus.AWAITING_APPROVAL, approval_reason=_said(st, exc.reason))
    except Exception as exc:
        # The model is told only the exception's type: its traceback is for the developer
        # (the call's sensitive argument values masked).
        log_exception(
            _log, st.hidden(), "%s raised (call %r, attempt %d)", spec.name, ctx.call_id, number
        )
        error = ToolError.of(
            ErrorCode.TOOL_ERROR,
            f"{spec.name} failed with an internal error",
            details={"exception": type(exc).__name__},
        )
        return Outcome(CallStatus.FAILED, error=error)
    return _succeeded(st, value)


def _succeeded(st: CallState, value: Any) -> Outcome:
    """The outcome of an attempt that returned `value`.

    From here on the tool has run: a result that cannot be made JSON is not a failure of the
    call (its effect happened), only of its record."""
    output = value if isinstance(value, ToolOutput) else None
    effect_ref = output.effect_ref if output is not None else None
    try:
        data = json_data(value if output is None else output.data)
    except NOT_JSON as exc:
        assert st.tool is not None
        note = unrecordable(st.tool.spec.name, f"{type(exc).__name__}: {exc}", None, st.hidden())
        return Outcome(CallStatus.SUCCEEDED, data=note, effect_ref=effect_ref)
    content = output.content if output is not None else None
    return Outcome(CallStatus.SUCCEEDED, data=data, effect_ref=effect_ref, content=content)


def _said(st: CallState, said: object) -> str:
    """What a tool said about the call (a failure's message, a reason) as it may be shown and
    recorded: text (a tool may pass an exception, say), lone surrogates replaced as in
    results, and the call's sensitive argument values masked."""
    if not isinstance(said, str):
        try:
            said = str(said)
        except Exception:
            said = f"(a {type(said).__name__} that cannot be shown as text)"
    return str(mask(safe_text(said), st.hidden()))  # (text in, text out)


def _details(name: str, details: Mapping[str, Any]) -> Any:
    """A failure's details as JSON data, made so as results are (dates, decimals, sets...):
    the model was shown them one way and, replayed from the ledger, another, and details the
    ledger cannot hold left the call unrecorded."""
    try:
        return json_data(details)
    except NOT_JSON as exc:
        _log.warning("the details of a failure of %s are not shown: %s", name, exc)
        return {"note": f"{name} gave details that are not JSON data, so they are not shown"}


def _timed_out(name: str, timeout: float, number: int) -> Outcome:
    # The timeout is per attempt: a retried read says which attempt ran out of it.
    which = f" (attempt {number}; each attempt may take {timeout:g} s)" if number > 1 else ""
    error = ToolError.of(
        ErrorCode.TIMEOUT,
        f"{name} did not finish within {timeout:g} s{which}",
        details={"timeout": timeout, "attempt": number},
    )
    return Outcome(CallStatus.TIMED_OUT, error=error, unknown=True)


def _retry_wait(rt: Runtime, st: CallState, outcome: Outcome, run: Attempts) -> float | None:
    """Seconds to wait before the next attempt, or None when there is none: the error is not
    retryable, a retry could repeat an effect, the policy says no (or fails to say), or the
    tool asked for a wait longer than the policy's `max_interval` (the call then ends with
    the wait in its error, `retry_after`, to be proposed again then: waiting here would hold
    the call, and a batch with it, far past its timeout)."""
    assert st.tool is not None
    if (
        rt.draining
        or outcome.error is None
        or not (outcome.nothing_sent or st.tool.spec.retry_safe)
    ):
        return None
    policy = st.tool.retry or rt.retry
    try:
        if not policy.should_retry(outcome.error, run.number):
            return None
        wait = policy.delay(run.number)
        if outcome.error.retry_after is not None:
            asked = float(outcome.error.retry_after)
            if asked > policy.max_interval:
                return None
            wait = max(wait, asked)
        if not math.isfinite(wait) or wait < 0:
            raise ValueError(f"a retry wait of {wait!r} s")
    except Exception:  # a policy that cannot decide or say how long: no retry
        log_exception(
            _log, st.hidden(), "the retry policy of %s failed; it is not retried", st.tool.spec.name
        )
        return None
    return wait


async def _pause(rt: Runtime, wait: float) -> None:
    """Wait between two attempts; `Keeper.drain` cuts the wait short."""
    with rt.cancel_scope() as waiting:
        rt.waits.add(waiting)
        if rt.draining:  # (drained while the next attempt was being recorded)
            waiting.cancel()
        try:
            await (rt.sleep or anyio.sleep)(wait)
        finally:
            rt.waits.discard(waiting)


def _cancelled(run: Attempts) -> Outcome:
    """How a call cancelled while it ran ended: whether it may run again is recorded."""
    error = ToolError.of(
        ErrorCode.CANCELLED, "the call was cancelled", details={"sent": run.may_have_run}
    )
    unknown = run.recorded is not None and run.may_have_run
    return Outcome(CallStatus.CANCELLED, error=error, unknown=unknown)


def _broken(run: Attempts) -> Outcome:
    error = ToolError.of(ErrorCode.INTERNAL_ERROR, "an internal error stopped the call")
    return Outcome(CallStatus.FAILED, error=error, unknown=run.may_have_run)
