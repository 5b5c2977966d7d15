"""1. Dedupe: a call id proposed again gets its recorded result, never a second run."""

from __future__ import annotations

import anyio

from ...core.errors import CallRefused, ErrorCode
from ...core.ids import id_problem, plain_id
from ...core.states import CallStatus
from ...core.values import Effect, ToolSpec
from ...ledger.base import CallRecord, current_owner, is_abandoned
from ...schema.canonical import canonical_json
from ...schema.validate import SchemaError, apply_defaults
from ..arguments import parse_arguments
from ..records import replay
from ..runtime import Runtime
from ..state import CallState
from ..steps import Abandoned, Step, refuse

__all__ = ["dedupe", "may_run_again"]


async def dedupe(rt: Runtime, st: CallState) -> Step:
    """The same call id with the same arguments (and principal) returns the recorded result;
    the same call id with others is CALL_ID_CONFLICT."""
    _check_ids(st)
    too_large: CallRefused | None = None
    try:
        parse_arguments(rt, st)
    except CallRefused as refused:
        # Refused once the record is read: a refusal is recorded on the call's own record
        # when there is one (or is a conflict with the call that record holds).
        too_large = refused
    record = await rt.store().get_call(st.call.task_id, st.call.call_id)
    if record is None:
        if too_large is not None:
            raise too_large
        return None
    st.record = record
    if record.principal_id != st.principal.id or record.tenant != st.principal.tenant:
        # A call id belongs to whoever proposed it first: another principal never gets its
        # result, nor changes its record (nothing is said about it either).
        raise _conflict(st)
    if record.status is CallStatus.REJECTED:
        if too_large is not None:
            raise too_large
        return None  # a refusal ran nothing: evaluate the proposal afresh
    if (
        too_large is not None
        or record.tool != st.call.name
        or (record.digest != st.request_digest and not _same_arguments(rt, st, record))
    ):
        raise _conflict(st)
    if record.status is CallStatus.AWAITING_APPROVAL:
        return None  # waiting for a person: the approval gate says how it stands
    if record.status is CallStatus.CANCELLED and may_run_again(rt, record):
        return None
    if record.status is CallStatus.RUNNING:
        return await _await_outcome(rt, st)
    if record.status.terminal:
        return replay(record, _spec(rt, record))
    return None


def _conflict(st: CallState) -> CallRefused:
    return refuse(
        ErrorCode.CALL_ID_CONFLICT,
        f"call id {st.call.call_id!r} was already used for a different call; use a new call id",
    )


def _check_ids(st: CallState) -> None:
    """Ids key the ledger: they must be text every store can hold, and not empty."""
    if plain_id(st.call.call_id) and plain_id(st.call.task_id):
        return  # (nearly every call: two quick checks, no loop)
    for what, value in (("call id", st.call.call_id), ("task id", st.call.task_id)):
        problem = id_problem(value)
        if problem is not None:
            raise refuse(
                ErrorCode.INVALID_CALL_ID,
                f"the {what} {problem}; give each call a short, unique id",
                field=what.replace(" ", "_"),
            )


def may_run_again(rt: Runtime, record: CallRecord) -> bool:
    """Whether a CANCELLED call may run when proposed again: nothing was sent, or its tool
    was, and still is, read-only or idempotent (a tool changed since proves nothing)."""
    details = (record.error or {}).get("details") or {}
    if details.get("sent") is False:
        return True
    tool = rt.catalog.get(record.tool)
    safe_then = record.effect == Effect.READ_ONLY.value or record.idempotent
    return safe_then and tool is not None and tool.spec.retry_safe


def _same_arguments(rt: Runtime, st: CallState, record: CallRecord) -> bool:
    """Whether the proposal is the recorded call with a default written out or left out.

    A record keeps the digest of the arguments as first proposed, and the validated arguments
    with defaults applied. Those are compared when they can be: for the tool version that was
    recorded, and only when no argument is redacted in the record (a secret that differs
    would go unseen, and another call would get this one's result)."""
    tool = rt.catalog.get(st.call.name)
    if tool is None or tool.spec.version != record.version or st.arguments is None:
        return False
    try:
        prepared = rt.prepared(tool)
    except SchemaError:
        return False
    if (
        not prepared.has_defaults
        or prepared.sensitive
        or prepared.validator.violations(st.arguments)
    ):
        return False
    validated = apply_defaults(tool.spec.input_schema, st.arguments)
    return canonical_json(validated) == canonical_json(record.arguments)


async def _await_outcome(rt: Runtime, st: CallState) -> Step:
    """Another process runs this call: wait for its end; take it over, or have it marked
    UNKNOWN_OUTCOME, when it was abandoned."""
    store = rt.store()
    record: CallRecord | None = st.record
    delay = 0.005
    while record is not None and record.status is CallStatus.RUNNING:
        now = rt.clock()
        unended = _unended_here(rt, record)
        if unended is not None or is_abandoned(record, now=now):
            if record.effect == Effect.READ_ONLY or record.idempotent or unended is False:
                rt.unended.pop((record.task_id, record.call_id), None)
                st.takeover = True
                return None
            return Abandoned(record)  # (the ledger's compare-and-set decides who marks it)
        if record.deadline is not None and now > record.deadline + 5.0:
            raise refuse(
                ErrorCode.CALL_IN_PROGRESS,
                "this call is still running in another process; try again later",
            )
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.2)
        record = await store.get_call(st.call.task_id, st.call.call_id)
    if record is None:
        raise refuse(ErrorCode.INTERNAL_ERROR, "the call record disappeared")
    if record.status is CallStatus.AWAITING_APPROVAL or (
        record.status is CallStatus.CANCELLED and may_run_again(rt, record)
    ):
        # The tool asked for approval while it ran (an end to tell about, not to replay: it
        # has no error and no data), or the other proposal was cancelled, not this one.
        st.record = record
        return None
    return replay(record, _spec(rt, record))


def _unended_here(rt: Runtime, record: CallRecord) -> bool | None:
    """Whether the effect of a RUNNING call may have happened, when this process wrote that
    record and gave it up, unable to end it (`Runtime.unended`); None when it did not."""
    key = (record.task_id, record.call_id)
    if key in rt.unended and record.owner != current_owner():
        del rt.unended[key]  # another process has taken the call over since
    return rt.unended.get(key)


def _spec(rt: Runtime, record: CallRecord) -> ToolSpec | None:
    """The recorded call's tool as it is now, if it still exists."""
    tool = rt.catalog.get(record.tool)
    return tool.spec if tool is not None else None
