"""Steps 8-11 of the pipeline: write RUNNING durably, execute under a timeout, retry only
when that is safe, and record the end.

A call with side effects is written RUNNING (committed) *before* its connector is invoked; a
read-only call is written once, when it ends. A failed attempt is retried only if its error is
retryable AND the tool is read-only or idempotent (or nothing was sent at all). A call whose
effect may or may not have happened ends UNKNOWN_OUTCOME and is never replayed blindly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import math
import time
from collections.abc import Coroutine, Generator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel

from ..connectors.base import ToolOutput, UnrecordableResult, UpstreamUnavailable
from ..core._fastinit import fast_new
from ..core.errors import ErrorCode, NotJSON, StoreError, ToolError
from ..core.signals import ApprovalRequired, OutcomeUnknown, RetryLater, ToolFailed
from ..core.states import CallStatus
from ..core.values import MCP_CONTENT, CallContext, Effect, ToolResult
from ..ledger.base import ApprovalRecord, LedgerStore, StaleState, current_owner
from ..observe.redact import log_exception, mask, mask_content, mask_error
from ..schema.canonical import safe_text
from ..schema.from_callable import NOT_JSON, json_data
from .records import (
    UNKNOWN_OUTCOME_ERROR,
    approval_pending_result,
    audit,
    binding,
    new_record,
)
from .runtime import Runtime, idempotency_key
from .state import CallState

__all__ = [
    "LEDGER_UNAVAILABLE",
    "LostRace",
    "hold_for_approval",
    "record_refusal",
    "run_call",
]

_log = logging.getLogger("toolkeeper")

_NOT_RECORDED = frozenset(
    {ErrorCode.CALL_ID_CONFLICT, ErrorCode.CALL_IN_PROGRESS, ErrorCode.INVALID_CALL_ID}
)
"""Refusals that leave the ledger alone: the id is another call's, or cannot be a key."""


LEDGER_UNAVAILABLE = ToolError.of(
    ErrorCode.INTERNAL_ERROR,
    "the ledger failed or cannot be reached, so the call could not be recorded; try it again later",
    retryable=True,
)
"""The refusal of a call the ledger failed to record, when running it again is safe."""


class LostRace(Exception):
    """Another process changed the call's record first; the pipeline starts over."""


@dataclass(slots=True)
class _Outcome:
    status: CallStatus
    data: Any = None
    effect_ref: str | None = None
    error: ToolError | None = None
    nothing_sent: bool = False
    """The failure happened before the request left: a retry cannot repeat an effect."""
    unknown: bool = False
    """The request may have taken effect."""
    approval_reason: str | None = None
    content: tuple[Mapping[str, Any], ...] | None = None
    """MCP content blocks of the result (`ToolOutput.content`), recorded with the data."""


async def _attempt(
    rt: Runtime, st: CallState, ctx: CallContext, started: _Started | None = None
) -> _Outcome:
    assert st.tool is not None and st.validated is not None
    spec = st.tool.spec
    try:
        value = await _invoke(rt, st, ctx, started)
    except TimeoutError:
        if time.monotonic() < ctx.deadline:
            # The tool's own timeout (a socket's, say), not ours: its request may have left.
            error = ToolError.of(
                ErrorCode.TOOL_ERROR,
                f"{spec.name} timed out waiting for the service it calls",
                retryable=True,
            )
            return _Outcome(status=CallStatus.FAILED, error=error, unknown=True)
        return _timed_out(spec.name, spec.timeout, ctx.attempt)
    except ToolFailed as exc:
        error = ToolError.of(
            exc.code or ErrorCode.TOOL_ERROR,
            _said(st, exc.message),
            retryable=exc.retryable,
            details=mask(_details(spec.name, exc.details), st.hidden()),
        )
        return _Outcome(status=CallStatus.FAILED, error=error)
    except RetryLater as exc:
        error = ToolError.of(
            ErrorCode.TOOL_ERROR,
            _said(st, exc.reason),
            retryable=True,
            retry_after=exc.after,
        )
        return _Outcome(status=CallStatus.FAILED, error=error)
    except UpstreamUnavailable as exc:
        error = ToolError.of(ErrorCode.UPSTREAM_UNAVAILABLE, _said(st, exc.reason))
        return _Outcome(status=CallStatus.FAILED, error=error, nothing_sent=True)
    except OutcomeUnknown as exc:
        error = ToolError.of(ErrorCode.UPSTREAM_UNAVAILABLE, _said(st, exc.reason), retryable=True)
        return _Outcome(status=CallStatus.FAILED, error=error, unknown=True)
    except UnrecordableResult as exc:
        note = _unrecordable(spec.name, exc.reason, exc.what, st.hidden())
        return _Outcome(status=CallStatus.SUCCEEDED, data=note)
    except ApprovalRequired as exc:
        if ctx.approval_id is not None:
            error = ToolError.of(ErrorCode.TOOL_ERROR, "the tool asked for approval again")
            return _Outcome(status=CallStatus.FAILED, error=error)
        reason = _said(st, exc.reason)
        return _Outcome(status=CallStatus.AWAITING_APPROVAL, approval_reason=reason)
    except Exception as exc:
        # The model is told only the exception's type: its traceback is for the developer
        # (the call's sensitive argument values masked).
        log_exception(
            _log,
            st.hidden(),
            "%s raised (call %r, attempt %d)",
            spec.name,
            ctx.call_id,
            ctx.attempt,
        )
        error = ToolError.of(
            ErrorCode.TOOL_ERROR,
            f"{spec.name} failed with an internal error",
            details={"exception": type(exc).__name__},
        )
        return _Outcome(status=CallStatus.FAILED, error=error)
    return _succeeded(st, value)


def _succeeded(st: CallState, value: Any) -> _Outcome:
    """The outcome of an attempt that returned `value`.

    From here on the tool has run: a result that cannot be made JSON is not a failure of the
    call (its effect happened), only of its record."""
    output = value if isinstance(value, ToolOutput) else None
    try:
        data = json_data(value if output is None else output.data)
    except NOT_JSON as exc:
        assert st.tool is not None
        note = _unrecordable(st.tool.spec.name, f"{type(exc).__name__}: {exc}", None, st.hidden())
        effect_ref = output.effect_ref if output is not None else None
        return _Outcome(status=CallStatus.SUCCEEDED, data=note, effect_ref=effect_ref)
    if output is None:
        return _Outcome(CallStatus.SUCCEEDED, data)  # (by position: the common end)
    return _Outcome(
        status=CallStatus.SUCCEEDED,
        data=data,
        effect_ref=output.effect_ref,
        content=output.content,
    )


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


class _Resume:
    """Awaits the rest of a coroutine that has already run up to its first suspension."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.first
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # cancellation and the like go to the tool
                try:
                    value = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as done:
                    return done.value


_UNSTARTED: Any = object()


@dataclass(slots=True)
class _Started:
    """The first attempt of a read-only call, which `_run_read` began without a deadline:
    where its first step left it, for `_invoke` to go on from there (never to call again)."""

    pending: Any = None
    """What the connector's `invoke` returned."""
    step: Any = _UNSTARTED
    """What its coroutine yielded when it first suspended; `_UNSTARTED` when not run yet."""
    raised: BaseException | None = None
    """What its first step raised."""


async def _invoke(
    rt: Runtime, st: CallState, ctx: CallContext, started: _Started | None = None
) -> Any:
    """Run one attempt; raise TimeoutError when it outlives the tool's timeout.

    The attempt starts eagerly, without a deadline: a tool that finishes without ever
    suspending (an in-memory lookup, a cache hit) cannot time out, so it never pays for a
    deadline timer. Only when it suspends does its deadline start to count. `started` is an
    attempt begun already, by `_run_read`.
    """
    assert st.tool is not None and st.validated is not None
    spec = st.tool.spec
    if started is None:
        pending = st.tool.connector.invoke(spec, st.validated, ctx)
        step = _UNSTARTED
    elif started.raised is not None:
        raise started.raised
    else:
        pending, step = started.pending, started.step
    if not inspect.iscoroutine(pending):
        with anyio.fail_after(spec.timeout):
            return await pending
    if rt.native_asyncio:
        # asyncio's own timeout keeps no stack of scopes, so it can start after the first
        # step, and a tool that never suspends costs nothing at all.
        if step is _UNSTARTED:
            try:
                step = pending.send(None)
            except StopIteration as done:
                return done.value
        async with asyncio.timeout(spec.timeout):
            return await _Resume(pending, step)
    # anyio scopes must nest: this one is entered before the tool may enter its own (which
    # is why `_run_read` begins no attempt on another event loop).
    with rt.cancel_scope() as scope:
        try:
            step = pending.send(None)
        except StopIteration as done:
            return done.value
        scope.deadline = anyio.current_time() + spec.timeout
        return await _Resume(pending, step)
    if scope.cancelled_caught:
        raise TimeoutError
    raise AssertionError("unreachable")  # pragma: no cover


_NOT_JSON = "is not JSON data (nested too deeply, or of a type JSON cannot hold)"


def _unrecordable(
    name: str, reason: str, what: str | None = None, secrets: tuple[str, ...] = ()
) -> str:
    """What is recorded and shown instead of a result that cannot be: the call ran. `reason`
    is logged, with the call's sensitive values (`secrets`) masked: it may quote the result."""
    _log.warning("the result of %s is not recorded: %s", name, mask(reason, secrets))
    return f"{name} ran and finished, but its result {what or _NOT_JSON}, so it is not shown"


def _timed_out(name: str, timeout: float, attempt: int) -> _Outcome:
    # The timeout is per attempt: a retried read says which attempt ran out of it.
    which = f" (attempt {attempt}; each attempt may take {timeout:g} s)" if attempt > 1 else ""
    error = ToolError.of(
        ErrorCode.TIMEOUT,
        f"{name} did not finish within {timeout:g} s{which}",
        details={"timeout": timeout, "attempt": attempt},
    )
    return _Outcome(status=CallStatus.TIMED_OUT, error=error, unknown=True)


def _final(st: CallState, outcome: _Outcome) -> _Outcome:
    """An unknown outcome of a tool that may not be repeated is UNKNOWN_OUTCOME."""
    assert st.tool is not None
    if outcome.unknown and not st.tool.spec.retry_safe:
        details = {"cause": outcome.error.code.value} if outcome.error else {}
        error = ToolError.of(
            ErrorCode.UNKNOWN_OUTCOME, UNKNOWN_OUTCOME_ERROR.message, details=details
        )
        return _Outcome(status=CallStatus.UNKNOWN_OUTCOME, error=error)
    return outcome


def _may_retry(rt: Runtime, st: CallState, outcome: _Outcome, attempt: int) -> bool:
    assert st.tool is not None
    if outcome.error is None or not (outcome.nothing_sent or st.tool.spec.retry_safe):
        return False
    return (st.tool.retry or rt.retry).should_retry(outcome.error, attempt)


def _retry_wait(rt: Runtime, st: CallState, outcome: _Outcome, attempt: int) -> float | None:
    """Seconds to wait before the next attempt: the policy's, or longer if the tool said so;
    None when the tool asked for longer than the policy's `max_interval`. The call then ends
    with the wait in its error (`retry_after`), to be proposed again then: waiting here (a
    Retry-After of an hour) would hold the call, and a batch with it, far past its timeout."""
    assert st.tool is not None
    policy = st.tool.retry or rt.retry
    wait = policy.delay(attempt)
    if outcome.error is not None and outcome.error.retry_after is not None:
        asked = float(outcome.error.retry_after)
        if asked > policy.max_interval:
            return None
        wait = max(wait, asked)
    if not math.isfinite(wait) or wait < 0:
        raise ValueError(f"a retry wait of {wait!r} s")
    return wait


async def hold_for_approval(rt: Runtime, st: CallState, approval: ApprovalRecord) -> ToolResult:
    """Persist the call as AWAITING_APPROVAL and tell the model how to get it approved.

    When the call's record is not written (another process recorded the call first, or the
    ledger failed), `approval` (requested for this attempt) is withdrawn, so no one is asked
    to approve a request that nothing waits for.
    """
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


_ASK_ANEW = "the approval request no longer fits the call (its tool changed, or it was withdrawn)"


async def _hold(rt: Runtime, st: CallState, approval: ApprovalRecord) -> ToolResult:
    if st.record is not None and st.record.status is CallStatus.AWAITING_APPROVAL:
        # A wait cannot follow a wait: the record ends the one for the request it can no
        # longer use (nothing ran), then waits for this one.
        await _end_wait(rt, st, ToolError.of(ErrorCode.APPROVAL_EXPIRED, _ASK_ANEW))
    store = rt.store()
    previous = st.record.status if st.record is not None else None
    if st.record is None:
        _, created = await store.claim_call(
            new_record(rt, st, CallStatus.AWAITING_APPROVAL, approval_id=approval.id)
        )
        if not created:
            raise LostRace
    else:
        await _move(
            store,
            st,
            expected=st.record.status,
            target=CallStatus.AWAITING_APPROVAL,
            changes=_identity_changes(st) | {"approval_id": approval.id, "error": None},
        )
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


async def _move(
    store: LedgerStore,
    st: CallState,
    *,
    expected: CallStatus,
    target: CallStatus,
    changes: dict[str, Any],
    expected_attempt: int | None = None,
) -> None:
    """Change the call's record, or start over if another process changed it first."""
    try:
        await store.transition(
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


def run_call(rt: Runtime, st: CallState) -> Coroutine[Any, Any, ToolResult]:
    """Run an authorized call to its end and record it (await what this returns: the way the
    call takes, with no coroutine of its own around it)."""
    assert st.tool is not None
    if st.record is None and rt.native_asyncio and st.tool.spec.effect is Effect.READ_ONLY:
        return _run_read(rt, st)
    return _run_call(rt, st)


async def _run_read(rt: Runtime, st: CallState) -> ToolResult:
    """Run a read-only call proposed for the first time: the common call, on its short way.

    Its first attempt begins here, without a deadline (see `_invoke`). A tool that returns
    without suspending is recorded at once, as `_run_call` records a success; a first step
    that suspends or raises goes on in `_run_call`, as any call does, from where it stands:
    the tool is never called twice for one attempt.
    """
    assert st.tool is not None and st.validated is not None
    spec = st.tool.spec
    started_at = rt.clock()
    st.idempotency_key = idempotency_key(st.call.task_id, st.call.call_id)
    approval_id = st.approval.id if st.approval is not None else None
    ctx = _context(st, 1, time.monotonic() + spec.timeout, approval_id)
    begun: _Started | None = None
    try:
        pending = st.tool.connector.invoke(spec, st.validated, ctx)
        if not inspect.iscoroutine(pending):
            begun = _Started(pending=pending)
        else:
            try:
                begun = _Started(pending=pending, step=pending.send(None))
            except StopIteration as done:
                value = done.value
    except BaseException as exc:  # (`_attempt` tells what it means, in `_run_call`)
        begun = _Started(raised=exc)
    if begun is not None:
        return await _run_call(rt, st, (started_at, ctx, begun))
    return await _record_end(rt, st, _succeeded(st, value), 1, started_at, None)


def _context(st: CallState, attempt: int, deadline: float, approval_id: str | None) -> CallContext:
    """What the tool is told about the attempt (`deadline`: on the monotonic clock)."""
    assert st.tool is not None and st.validated is not None
    spec = st.tool.spec
    return _new_context(  # (every field, in CallContext's order)
        st.call.call_id,
        st.call.task_id,
        spec.name,  # tool
        spec.version,
        st.principal,
        attempt,
        deadline,
        st.idempotency_key,
        st.validated,  # arguments
        approval_id,
    )


_new_context = fast_new(CallContext)
_new_result = fast_new(ToolResult)


async def _run_call(
    rt: Runtime,
    st: CallState,
    begun: tuple[float, CallContext, _Started] | None = None,
) -> ToolResult:
    """Run an authorized call to its end and record it; `begun` is (started_at, context,
    attempt) of a first attempt `_run_read` began."""
    assert st.tool is not None and st.validated is not None
    spec = st.tool.spec
    store = rt.store()
    approval_id = st.approval.id if st.approval is not None else None
    # A takeover, or a cancelled call run again, goes on counting the call's attempts.
    again = st.record is not None and (st.takeover or st.record.status is CallStatus.CANCELLED)
    attempt = (st.record.attempt if st.record is not None and again else 0) + 1
    started_at = rt.clock() if begun is None else begun[0]
    st.idempotency_key = st.idempotency_key or idempotency_key(st.call.task_id, st.call.call_id)
    persisted: CallStatus | None = None
    if spec.has_side_effects:
        deadline = started_at + spec.timeout
        # A cancellation must not cut the write short: interrupted, a commit may land all the
        # same (PostgreSQL) with no one left to end the record. It is delivered just after.
        with anyio.CancelScope(shield=True):
            try:
                await _persist_running(rt, st, attempt, deadline, approval_id)
            except StoreError:
                # The write may have landed all the same, a RUNNING record that ran nothing.
                rt.unended[(st.call.task_id, st.call.call_id)] = False
                raise
        if rt.unended:
            rt.unended.pop((st.call.task_id, st.call.call_id), None)  # (written now, at last)
        persisted = CallStatus.RUNNING
    deadline_mono = time.monotonic() + spec.timeout
    recorded = attempt if persisted is not None else None  # the attempt our RUNNING record holds
    sent = False  # whether an attempt may have sent its request (an effect may have happened)
    attempting = False
    outcome: _Outcome | None = None
    try:
        if persisted is not None:
            await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled meanwhile: nothing ran
        while True:
            started: _Started | None = None
            if begun is not None:
                _, ctx, started = begun
                begun = None
            else:
                ctx = _context(st, attempt, deadline_mono, approval_id)
            attempting = True
            outcome = await _attempt(rt, st, ctx, started)
            attempting = False
            sent = sent or not (
                outcome.nothing_sent or outcome.status is CallStatus.AWAITING_APPROVAL
            )
            if outcome.status is CallStatus.AWAITING_APPROVAL:
                try:
                    return await _tool_asked_approval(rt, st, outcome, persisted)
                except StoreError as exc:
                    # The tool ran nothing and its request is withdrawn: proposed again once
                    # the ledger is back, the call runs (and asks) anew.
                    if persisted is not None:
                        _give_up(rt, st, False)
                    else:
                        _log.error("the ledger failed on a call of %s: %s", spec.name, exc)
                    failed = _Outcome(status=CallStatus.FAILED, error=LEDGER_UNAVAILABLE)
                    return _result(st, failed, attempt, started_at, rt.clock(), approval_id)
            try:
                if (
                    outcome.status is CallStatus.SUCCEEDED
                    or rt.draining
                    or not _may_retry(rt, st, outcome, attempt)
                    or (wait := _retry_wait(rt, st, outcome, attempt)) is None
                ):
                    break
            except Exception:  # a policy that cannot decide or say how long: no retry
                log_exception(
                    _log, st.hidden(), "the retry policy of %s failed; it is not retried", spec.name
                )
                break
            if persisted is not None:
                # The deadline covers the wait too, written before it: a record whose owner
                # is waiting to retry is not abandoned (`ledger unknown` leaves it alone). A
                # record at another attempt was taken over by another process meanwhile: the
                # call is its to end, and the pipeline starts over (dedupe waits for its end).
                await _move(
                    store,
                    st,
                    expected=CallStatus.RUNNING,
                    target=CallStatus.RUNNING,
                    changes={"attempt": attempt + 1, "deadline": rt.clock() + wait + spec.timeout},
                    expected_attempt=recorded,
                )
                recorded = attempt + 1
                audit(rt, st, CallStatus.RUNNING, previous=CallStatus.RUNNING, attempt=attempt + 1)
            with rt.cancel_scope() as waiting:  # `Keeper.drain` cuts the wait short
                rt.waits.add(waiting)
                if rt.draining:  # (drained while the next attempt was being recorded)
                    waiting.cancel()
                try:
                    await (rt.sleep or anyio.sleep)(wait)
                finally:
                    rt.waits.discard(waiting)
            if rt.draining:
                break  # (the record ends with the attempt that ran last)
            attempt += 1
            deadline_mono = time.monotonic() + spec.timeout
    except anyio.get_cancelled_exc_class():
        cancelled = _Outcome(
            status=CallStatus.CANCELLED,
            error=ToolError.of(
                ErrorCode.CANCELLED,
                "the call was cancelled",
                details={"sent": sent or attempting},  # whether it may run again
            ),
            unknown=persisted is not None and (sent or attempting),
        )
        # The cancellation is what the caller must get: a record the ledger fails to end
        # stays RUNNING, given up.
        await _end_on_the_way_out(
            rt, st, cancelled, (attempt, started_at, persisted, recorded), sent or attempting
        )
        raise
    except LostRace:
        raise  # another process recorded the call first: the pipeline starts over
    except Exception:  # a fault of ours after RUNNING was written: the call still gets its end
        log_exception(
            _log,
            st.hidden(),
            "an internal error stopped %s after it was written RUNNING",
            spec.name,
        )
        if outcome is None or attempting:
            outcome = _Outcome(
                status=CallStatus.FAILED,
                error=ToolError.of(ErrorCode.INTERNAL_ERROR, "an internal error stopped the call"),
                unknown=sent or attempting,
            )
    except BaseException as exc:
        # KeyboardInterrupt, or what a tool raised that is no Exception (SystemExit from its
        # argparse or sys.exit, a BaseException of its own): it goes on up, once the call's
        # record has its end (left RUNNING, it waited for a recovery that a process that
        # lives on never runs, and every proposal of the call id waited for it).
        if persisted is not None:
            interrupted = _Outcome(
                status=CallStatus.FAILED,
                error=ToolError.of(
                    ErrorCode.TOOL_ERROR,
                    f"{spec.name} was interrupted",
                    details={"exception": type(exc).__name__},
                ),
                unknown=sent or attempting,
            )
            await _end_on_the_way_out(
                rt,
                st,
                interrupted,
                (attempt, started_at, persisted, recorded),
                sent or attempting,
                failing=Exception,
            )
        raise
    assert outcome is not None
    if persisted is None:
        return await _record_end(rt, st, _final(st, outcome), attempt, started_at, persisted)
    # The effect may have happened: a cancellation must not stop its record half-way (the
    # call would stay RUNNING); it is delivered once the record is written.
    with anyio.CancelScope(shield=True):
        try:
            result = await _record_end(
                rt, st, _final(st, outcome), attempt, started_at, persisted, recorded
            )
        except StoreError:
            lost = sent or attempting
            _give_up(rt, st, lost)
            failed = _Outcome(status=CallStatus.FAILED, error=LEDGER_UNAVAILABLE, unknown=lost)
            # Its effect may have happened: UNKNOWN_OUTCOME, never run again (see `_final`).
            return _result(st, _final(st, failed), attempt, started_at, rt.clock(), approval_id)
    return result


async def _end_on_the_way_out(
    rt: Runtime,
    st: CallState,
    outcome: _Outcome,
    where: tuple[int, float, CallStatus | None, int | None],
    may_have_run: bool,
    *,
    failing: type[Exception] = StoreError,
) -> None:
    """Record the end of a call an exception (a cancellation, a `SystemExit`) is taking away,
    shielded from cancellation, before it goes on up. `where` is (attempt, started_at,
    persisted, recorded) as `_record_end` takes them. A call written RUNNING whose end fails
    with `failing` stays RUNNING, given up; one never written lets the failure go on up."""
    attempt, started_at, persisted, recorded = where
    with anyio.CancelScope(shield=True):
        try:
            await _record_end(rt, st, _final(st, outcome), attempt, started_at, persisted, recorded)
        except failing:
            if persisted is None:
                raise
            _give_up(rt, st, may_have_run)


def _give_up(rt: Runtime, st: CallState, may_have_run: bool) -> None:
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


async def _persist_running(
    rt: Runtime, st: CallState, attempt: int, deadline: float, approval_id: str | None
) -> None:
    """Write RUNNING (committed) before the effect may start: a first record, or the
    transition of the existing one."""
    store = rt.store()
    if st.record is None:
        _, created = await store.claim_call(
            new_record(
                rt,
                st,
                CallStatus.RUNNING,
                attempt=attempt,
                deadline=deadline,
                approval_id=approval_id,
            )
        )
        if not created:
            raise LostRace
        rt.release(st)  # the RUNNING record counts against the budget now
        audit(rt, st, CallStatus.RUNNING, attempt=attempt, first=True)
    else:
        changes = _identity_changes(st) | {
            "attempt": attempt,
            "deadline": deadline,
            "approval_id": approval_id,
        }
        # A takeover of an abandoned call is RUNNING -> RUNNING: the attempt tells the one
        # process that wins it from the others that read the same abandoned record.
        await _move(
            store,
            st,
            expected=st.record.status,
            target=CallStatus.RUNNING,
            changes=changes,
            expected_attempt=st.record.attempt,
        )
        rt.release(st)
        audit(rt, st, CallStatus.RUNNING, previous=st.record.status, attempt=attempt)


async def _tool_asked_approval(
    rt: Runtime, st: CallState, outcome: _Outcome, persisted: CallStatus | None
) -> ToolResult:
    assert st.tool is not None and st.validated is not None
    with anyio.CancelScope(shield=True):  # a request is only ever made with its record
        if persisted is not None:
            st.record = await rt.store().get_call(st.call.task_id, st.call.call_id)
        requested = await rt.approvals.request(
            binding(rt, st),
            arguments=st.redacted,
            reason=outcome.approval_reason or "the tool asked",
        )
        held = await hold_for_approval(rt, st, requested)
    return held


async def _record_end(
    rt: Runtime,
    st: CallState,
    outcome: _Outcome,
    attempt: int,
    started_at: float,
    persisted: CallStatus | None,
    recorded: int | None = None,
) -> ToolResult:
    """Write the end of the call (a first record, or the last transition of its record) and
    return its result. `recorded` is the attempt our RUNNING record holds, when we wrote one:
    had another process taken the call over meanwhile, its attempt is not ours to end."""
    assert st.tool is not None
    store = rt.store()
    approval_id = st.approval.id if st.approval is not None else None
    previous = persisted or (st.record.status if st.record is not None else None)
    outcome = _masked(outcome, st.hidden())
    while True:  # twice at most: see NotJSON below
        error_dict = outcome.error.to_dict() if outcome.error is not None else None
        try:
            if previous is None:
                _, created = await store.claim_call(
                    new_record(
                        rt,
                        st,
                        outcome.status,
                        attempt=attempt,
                        result=outcome.data,
                        content=outcome.content,
                        error=error_dict,
                        effect_ref=outcome.effect_ref,
                        approval_id=approval_id,
                    )
                )
                if not created:
                    # A concurrent proposal of this call id ended first: dedupe decides
                    # between its replay and a conflict (other arguments, tool or principal).
                    raise LostRace
            else:
                changes: dict[str, Any] = {
                    "attempt": attempt,
                    "result": outcome.data,
                    "content": outcome.content,
                    "error": error_dict,
                    "effect_ref": outcome.effect_ref,
                }
                if persisted is None:
                    changes |= _identity_changes(st) | {"approval_id": approval_id}
                await _move(
                    store,
                    st,
                    expected=previous,
                    target=outcome.status,
                    changes=changes,
                    expected_attempt=recorded,
                )
            break
        except NotJSON as exc:
            if outcome.content is None and (outcome.data is None or isinstance(outcome.data, str)):
                raise  # (a note is JSON: the store failed on something else)
            # The store cannot hold the result (a connector's data nested too deeply): the
            # call ran all the same, so it is recorded as it ended, a note in place of data.
            note = _unrecordable(st.tool.spec.name, str(exc), None, st.hidden())
            outcome = dataclasses.replace(outcome, data=note, content=None)  # nothing shown
    if st.reserved:
        rt.release(st)  # its record counts now
    finished_at = rt.clock()
    audit(
        rt,
        st,
        outcome.status,
        previous=previous,
        attempt=attempt,
        error=outcome.error,
        approval_id=approval_id,
        first=previous is None,
        duration=round((finished_at - started_at) * 1e6) / 1e6,
    )
    return _result(st, outcome, attempt, started_at, finished_at, approval_id)


def _masked(outcome: _Outcome, secrets: tuple[str, ...]) -> _Outcome:
    """`outcome` with the call's sensitive argument values (`secrets`) masked in its data,
    content blocks, error and effect reference: what the ledger, the audit log and every
    model then get."""
    if not secrets:
        return outcome
    return dataclasses.replace(
        outcome,
        data=mask(outcome.data, secrets),
        content=mask_content(outcome.content, secrets),
        error=mask_error(outcome.error, secrets),
        effect_ref=mask(outcome.effect_ref, secrets),
    )


def _result(
    st: CallState,
    outcome: _Outcome,
    attempt: int,
    started_at: float,
    finished_at: float,
    approval_id: str | None,
) -> ToolResult:
    """The result of a call that ran, as it ended."""
    assert st.tool is not None
    spec = st.tool.spec
    return _new_result(  # (every field, in ToolResult's order)
        st.call.call_id,
        spec.name,  # tool
        outcome.status,
        outcome.data,
        outcome.error,
        spec.version,
        spec.source,
        attempt,
        started_at,
        finished_at,
        outcome.effect_ref,
        approval_id,
        False,  # replayed
        {MCP_CONTENT: outcome.content} if outcome.content else {},  # metadata
    )


async def record_refusal(rt: Runtime, st: CallState, error: ToolError) -> ToolResult:
    """Record a refused call as REJECTED (nothing ran) and return the refusal."""
    store = rt.store()
    # A cancelled call refused when proposed again stays as it was: CANCELLED counts against
    # budgets (it may have run), a refusal does not.
    cancelled = st.record is not None and st.record.status is CallStatus.CANCELLED
    if error.code not in _NOT_RECORDED and not cancelled:
        previous = st.record.status if st.record is not None else None
        if st.record is None:
            _, created = await store.claim_call(
                new_record(rt, st, CallStatus.REJECTED, error=error.to_dict())
            )
            if not created:
                raise LostRace
        else:
            changes: dict[str, Any] = {"error": error.to_dict(), "digest": st.request_digest}
            if st.redacted:
                changes["arguments"] = st.redacted
            await _move(
                store, st, expected=st.record.status, target=CallStatus.REJECTED, changes=changes
            )
        audit(rt, st, CallStatus.REJECTED, previous=previous, error=error, first=previous is None)
    return ToolResult(
        call_id=st.call.call_id,
        tool=st.call.name,
        status=CallStatus.REJECTED,
        error=error,
        version=st.tool.spec.version if st.tool is not None else None,
    )
