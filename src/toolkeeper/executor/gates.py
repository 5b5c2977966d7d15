"""The gates a call passes before it may run, in the order DESIGN.md fixes:

1 dedupe → 2 lookup → 3 authorize → 4 validate → 5 business rules → 6 approval → 7 budget.

Each gate is `(rt, st) -> None | ToolResult | Awaitable[ToolResult | None]`: None lets the call
go on, a result ends the pipeline early (a replay, an approval request), and `CallRefused`
refuses the call. A gate with nothing to wait for answers directly, and one that must wait
(for the ledger, a rule, a limiter) returns an awaitable: most calls then pass most gates
without creating a coroutine. Steps 8-11 (ledger, execute, retry, record) are in `run.py`.
"""

from __future__ import annotations

import difflib
import inspect
import json
import logging
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from ..core.errors import CallRefused, ErrorCode, ToolError
from ..core.states import CallStatus
from ..core.values import Effect, Principal, ToolCall
from ..ledger.base import ApprovalStatus, CallRecord, current_owner, is_abandoned
from ..ledger.recovery import mark_unknown
from ..observe.redact import log_exception, mask, overlaps, redact
from ..policy.approvals import ApprovalCheck
from ..policy.budgets import COUNTED_STATUSES, rate_key
from ..policy.grants import exists_for, may_use
from ..policy.rules import Decision, ParameterMissing, RuleInput, Verdict
from ..schema.canonical import canonical_json, digest_bytes, parse_canonical
from ..schema.validate import SchemaError, Violation, apply_defaults, violations_text
from .records import approval_pending_result, binding, replay
from .runtime import Runtime
from .state import CallState, Prepared

__all__ = [
    "Gate",
    "approval",
    "authorize",
    "budget",
    "dedupe",
    "express",
    "id_problem",
    "lookup",
    "rules",
    "validate",
]

Gate = Callable[[Runtime, CallState], Any]

_log = logging.getLogger("toolkeeper")


def _refuse(code: ErrorCode, message: str, **details: Any) -> CallRefused:
    return CallRefused(ToolError.of(code, message, details=details))


def _parse(rt: Runtime, st: CallState) -> None:
    raw = st.call.arguments
    if isinstance(raw, str):
        # A character is at most 4 bytes of UTF-8: most texts need no encoding to be sized.
        size = (
            len(raw)
            if len(raw) * 4 <= rt.max_argument_bytes
            else len(raw.encode("utf-8", "surrogatepass"))
        )
        if size > rt.max_argument_bytes:
            raise _refuse(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"arguments are {size} bytes; the limit is {rt.max_argument_bytes}",
                limit=rt.max_argument_bytes,
            )
        fast = parse_canonical(raw, rt.digest_key)
        if fast is not None and isinstance(fast[0], dict):
            st.arguments, st.request_digest = fast
            return
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:
            st.parse_error = f"arguments are not valid JSON: {exc}"
            st.request_digest = "raw:" + digest_bytes(raw.encode("utf-8", "replace"), rt.digest_key)
            return
    else:
        parsed = raw
    try:
        text = canonical_json(parsed)
    except (TypeError, ValueError, RecursionError) as exc:
        st.parse_error = f"arguments are not JSON data: {exc}"
        try:
            shown = repr(raw)
        except Exception:  # (an int too long to print, an object whose repr raises)
            shown = f"<{type(raw).__name__}>"
        st.request_digest = "raw:" + digest_bytes(shown.encode("utf-8", "replace"), rt.digest_key)
        return
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        # An unpaired \ud800-\udfff escape decodes to no Unicode character: no tool or
        # ledger can take it.
        st.parse_error = (
            "arguments are not JSON data: they hold a lone UTF-16 surrogate (an unpaired "
            "\\uD800-\\uDFFF escape), which is not a character"
        )
        st.request_digest = "raw:" + digest_bytes(
            text.encode("utf-8", "surrogatepass"), rt.digest_key
        )
        return
    if not isinstance(raw, str) and len(encoded) > rt.max_argument_bytes:
        raise _refuse(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"arguments exceed the limit of {rt.max_argument_bytes} bytes",
            limit=rt.max_argument_bytes,
        )
    st.request_digest = digest_bytes(encoded, rt.digest_key)
    if isinstance(parsed, dict):
        st.arguments = parsed
    else:
        st.parse_error = f"arguments must be a JSON object, not {_json_kind(parsed)}"


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (a model knows no Python type names)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list | tuple) else "an object"


def may_run_again(rt: Runtime, record: CallRecord) -> bool:
    """Whether a CANCELLED call may run when proposed again: nothing was sent, or its tool
    was, and still is, read-only or idempotent (a tool changed since proves nothing)."""
    details = (record.error or {}).get("details") or {}
    if details.get("sent") is False:
        return True
    tool = rt.catalog.get(record.tool)
    safe_then = record.effect == Effect.READ_ONLY.value or record.idempotent
    return safe_then and tool is not None and tool.spec.retry_safe


async def _await_outcome(rt: Runtime, st: CallState) -> Any:
    """Another process runs this call: wait for its end, take it over if it was abandoned."""
    store = rt.store()
    record = st.record
    delay = 0.005
    while record is not None and record.status is CallStatus.RUNNING:
        now = rt.clock()
        unended = _unended_here(rt, record)
        if unended is not None or is_abandoned(record, now=now):
            if record.effect == Effect.READ_ONLY or record.idempotent or unended is False:
                rt.unended.pop((record.task_id, record.call_id), None)
                st.takeover = True
                return None
            # The ledger's compare-and-set decides who records the unknown outcome.
            marked = await mark_unknown(store, record)
            rt.unended.pop((record.task_id, record.call_id), None)
            if marked is not None:
                record = marked  # (what reading it again would find)
                continue
        elif record.deadline is not None and now > record.deadline + 5.0:
            raise _refuse(
                ErrorCode.CALL_IN_PROGRESS,
                "this call is still running in another process; try again later",
            )
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.2)
        record = await store.get_call(st.call.task_id, st.call.call_id)
    if record is None:
        raise _refuse(ErrorCode.INTERNAL_ERROR, "the call record disappeared")
    if record.status is CallStatus.AWAITING_APPROVAL or (
        record.status is CallStatus.CANCELLED and may_run_again(rt, record)
    ):
        # The tool asked for approval while it ran (an end to tell about, not to replay: it
        # has no error and no data), or the other proposal was cancelled, not this one.
        st.record = record
        return None
    return replay(record)


def _unended_here(rt: Runtime, record: CallRecord) -> bool | None:
    """Whether the effect of a RUNNING call may have happened, when this process wrote that
    record and gave it up, unable to end it (`Runtime.unended`); None when it did not."""
    key = (record.task_id, record.call_id)
    if key in rt.unended and record.owner != current_owner():
        del rt.unended[key]  # another process has taken the call over since
    return rt.unended.get(key)


MAX_ID_CHARS = 512
"""The longest call or task id taken (vendors' ids are a few dozen characters)."""


def _plain_id(value: object) -> bool:
    """The common case, at the cost of a few comparisons: short ASCII text without NUL."""
    return (
        type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_CHARS
    ) and "\x00" not in value


def id_problem(value: object) -> str | None:
    """What keeps `value` from keying the ledger as a call or task id ("is empty", ...), or
    None when every store can hold it."""
    if _plain_id(value):
        return None
    if not isinstance(value, str):
        return f"is not text but {_json_kind(value)}"
    if not value:
        return "is empty"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    if "\x00" in value:
        return "holds a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone UTF-16 surrogate, which is not a character"
    return None


def _check_ids(st: CallState) -> None:
    """Ids key the ledger: they must be text every store can hold, and not empty."""
    if _plain_id(st.call.call_id) and _plain_id(st.call.task_id):
        return  # (nearly every call: two quick checks, no loop)
    for what, value in (("call id", st.call.call_id), ("task id", st.call.task_id)):
        problem = id_problem(value)
        if problem is not None:
            raise _refuse(
                ErrorCode.INVALID_CALL_ID,
                f"the {what} {problem}; give each call a short, unique id",
                field=what.replace(" ", "_"),
            )


def express(rt: Runtime, call: ToolCall, principal: Principal) -> CallState | None:
    """The state the gates leave the common call in, found without waiting: a read-only tool
    the principal may use, valid arguments (JSON text or data), no business rule and no
    budget. All that is left to know is whether the ledger holds the call already (the one
    read dedupe waits for: `Executor` makes it, then runs the call or passes it through the
    gates). None when a gate may have more to say (a refusal, a rule, an approval...): the
    call passes through every gate then, in order, as any other."""
    if (
        rt.rules
        or rt.budgets is not None
        or type(call.name) is not str
        or not (_plain_id(call.call_id) and _plain_id(call.task_id))
    ):
        return None
    tool = rt.catalog.get(call.name)
    if (
        tool is None
        or tool.rules
        or tool.spec.effect is not Effect.READ_ONLY
        or not may_use(principal, tool.spec)
    ):
        return None
    try:
        prepared = rt.prepared(tool)
    except SchemaError:  # (the validate gate says so, once)
        return None
    st = CallState(call, principal)  # (by position: matching keywords costs more)
    st.tool, st.express = tool, True
    try:
        _parse(rt, st)
        if st.arguments is None:
            return None
        _check_arguments(st, prepared)
    except CallRefused:
        return None
    return st


async def dedupe(rt: Runtime, st: CallState) -> Any:
    """1. The same call id with the same arguments (and principal) returns the recorded result."""
    _check_ids(st)
    try:
        _parse(rt, st)
    except CallRefused as refused:
        # Refused once the record is read: a refusal is recorded on the call's own record
        # when there is one (or is a conflict with the call that record holds).
        too_large: CallRefused | None = refused
    else:
        too_large = None
    record = await rt.store().get_call(st.call.task_id, st.call.call_id)
    if record is None:
        if too_large is not None:
            raise too_large
        return None
    st.record = record
    if record.principal_id != st.principal.id or record.tenant != st.principal.tenant:
        # A call id belongs to whoever proposed it first: another principal never gets its
        # result, nor changes its record (nothing is said about it either).
        raise _refuse(
            ErrorCode.CALL_ID_CONFLICT,
            f"call id {st.call.call_id!r} was already used for a different call; use a new call id",
        )
    if record.status is CallStatus.REJECTED:
        if too_large is not None:
            raise too_large
        return None  # a refusal ran nothing: evaluate the proposal afresh
    if (
        too_large is not None
        or record.tool != st.call.name
        or (record.digest != st.request_digest and not _same_arguments(rt, st, record))
    ):
        raise _refuse(
            ErrorCode.CALL_ID_CONFLICT,
            f"call id {st.call.call_id!r} was already used for a different call; use a new call id",
        )
    if record.status is CallStatus.AWAITING_APPROVAL:
        return None  # waiting for a person: the approval gate says how it stands
    if record.status is CallStatus.CANCELLED and may_run_again(rt, record):
        return None
    if record.status is CallStatus.RUNNING:
        return await _await_outcome(rt, st)
    if record.status.terminal:
        return replay(record)
    return None


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


def lookup(rt: Runtime, st: CallState) -> Any:
    """2. The tool must exist, in the principal's tenant and environment: a tool of another
    tenant is refused as one that does not exist (its name says nothing about it)."""
    if not isinstance(st.call.name, str):
        raise _refuse(
            ErrorCode.UNKNOWN_TOOL,
            f"the tool name is not text but {_json_kind(st.call.name)}; name a tool",
        )
    tool = rt.catalog.get(st.call.name)
    if tool is None or not exists_for(st.principal, tool.spec):
        raise _no_such_tool(rt, st)
    st.tool = tool
    return None


def authorize(rt: Runtime, st: CallState) -> Any:
    """3. The principal must be granted the tool, in its tenant and environment. A tool it
    may not use is refused as one that does not exist: the same code, message, details and
    record (a tool it may not see is none of its business)."""
    assert st.tool is not None
    if may_use(st.principal, st.tool.spec):
        return None
    st.tool = None  # (recorded and answered as a call to no tool)
    raise _no_such_tool(rt, st)


def _no_such_tool(rt: Runtime, st: CallState) -> CallRefused:
    """The refusal of a call to a tool the principal cannot see, whether or not it exists."""
    visible = [t.spec.name for t in rt.catalog if may_use(st.principal, t.spec)]
    close = difflib.get_close_matches(st.call.name, visible, n=3, cutoff=0.6)
    return _refuse(
        ErrorCode.UNKNOWN_TOOL,
        f"there is no tool named {st.call.name!r}",
        **({"did_you_mean": close} if close else {}),
    )


def validate(rt: Runtime, st: CallState) -> Any:
    """4. The arguments must parse to an object that matches the input schema."""
    assert st.tool is not None
    if st.parse_error is not None or st.arguments is None:
        message = st.parse_error or "arguments must be a JSON object"
        raise _refuse(
            ErrorCode.INVALID_ARGUMENTS,
            message,
            violations=[{"pointer": "", "keyword": "json", "message": message}],
        )
    try:
        prepared = rt.prepared(st.tool)
    except SchemaError as exc:  # an upstream's broken schema: no call to it can be checked
        _log.warning("tool %s has an invalid input schema: %s", st.tool.spec.name, exc)
        raise _refuse(
            ErrorCode.TOOL_ERROR,
            f"{st.tool.spec.name!r} declares an input schema that is not valid JSON Schema, "
            "so its arguments cannot be checked; the call was not run",
        ) from exc
    _check_arguments(st, prepared)
    return None


def _check_arguments(st: CallState, prepared: Prepared) -> None:
    """Validate the parsed arguments, apply defaults, and redact them for the record."""
    assert st.tool is not None and st.arguments is not None
    st.prepared = prepared
    violations = prepared.validator.violations(st.arguments)
    if violations:
        raise _invalid(prepared, violations)
    st.validated = (
        apply_defaults(st.tool.spec.input_schema, st.arguments)
        if prepared.has_defaults
        else st.arguments
    )
    if prepared.check is not None:
        violations = prepared.check(st.validated)
        if violations:
            raise _invalid(prepared, violations)
    st.redacted = redact(st.validated, prepared.sensitive)


def _invalid(prepared: Prepared, violations: list[Violation]) -> CallRefused:
    if prepared.sensitive:
        # A validator quotes the value it refused: never a sensitive one, nor an object or
        # array holding one (`oneOf`, `maxItems`, a model's own validator quote them whole).
        violations = [
            replace(v, message=f"the value does not satisfy {v.keyword!r} (not shown)")
            if v.keyword != "required" and overlaps(prepared.sensitive, v.pointer)
            else v
            for v in violations
        ]
    return _refuse(
        ErrorCode.INVALID_ARGUMENTS,
        violations_text(violations),
        violations=[v.to_dict() for v in violations],
    )


def rules(rt: Runtime, st: CallState) -> Any:
    """5. Business rules; destructive tools need approval unless a rule waives it."""
    assert st.tool is not None
    if st.tool.rules or rt.rules:
        return _rules(rt, st)
    _default_approval(st)
    return None


async def _rules(rt: Runtime, st: CallState) -> Any:
    assert st.tool is not None and st.validated is not None
    own = len(st.tool.rules)
    checks = (*st.tool.rules, *rt.rules)
    if checks:
        inp = RuleInput(
            spec=st.tool.spec, arguments=st.validated, principal=st.principal, call=st.call
        )
        for index, rule in enumerate(checks):
            try:
                decision: Decision | None = rule(inp)
                if inspect.isawaitable(decision):
                    # A rule that asks a service which never answers would hold the call,
                    # and every proposal of its id, for ever: it has the tool's time.
                    with anyio.fail_after(st.tool.spec.timeout):
                        decision = await decision
            except ParameterMissing:
                if index >= own:
                    continue  # a keeper-wide rule about a parameter this tool does not have
                _log.error("business rule %r names a parameter %s lacks", rule, st.tool.spec.name)
                raise _unevaluated(rule) from None
            except Exception as exc:  # a broken rule fails closed, and says nothing inside
                log_exception(_log, st.hidden(), "business rule %r failed", rule)
                raise _unevaluated(rule) from exc
            if decision is None:
                continue
            if not isinstance(decision, Decision):  # True, "deny"...: not an answer, fail closed
                said = mask(repr(decision), st.hidden())
                _log.error("business rule %r returned %s, not a Decision", rule, said)
                raise _unevaluated(rule)
            # A reason quoting a sensitive argument is masked, as a tool's own words are.
            if decision.verdict is Verdict.DENY:
                reason = mask(decision.reason, st.hidden())
                details: dict[str, Any] = {"rule": getattr(rule, "__name__", "rule")}
                if decision.pointer is not None:
                    details["violations"] = [
                        {"pointer": decision.pointer, "keyword": "rule", "message": reason}
                    ]
                raise CallRefused(ToolError.of(decision.code, reason, details=details))
            if decision.verdict is Verdict.REQUIRE_APPROVAL and st.approval_reason is None:
                st.approval_reason = mask(decision.reason, st.hidden())
            if decision.verdict is Verdict.ALLOW and decision.skip_approval:
                st.skip_approval = True
    _default_approval(st)
    return None


def _unevaluated(rule: Any) -> CallRefused:
    """The refusal of a call whose rule could not say: fail closed, say nothing inside."""
    return _refuse(
        ErrorCode.PERMISSION_DENIED,
        "a policy rule could not be evaluated; the call was not run",
        rule=getattr(rule, "__name__", "rule"),
    )


def _default_approval(st: CallState) -> None:
    assert st.tool is not None
    if (
        st.tool.spec.effect is Effect.DESTRUCTIVE
        and st.approval_reason is None
        and not st.skip_approval
    ):
        st.approval_reason = f"{st.tool.spec.name} is destructive"


_TOOL_CHANGED = "the tool changed before the request was decided"


def approval(rt: Runtime, st: CallState) -> Any:
    """6. An approval bound to these exact validated arguments, when one is needed."""
    record = st.record
    if st.approval_reason is None and (
        record is None or record.status is not CallStatus.AWAITING_APPROVAL
    ):
        return None
    return _approval(rt, st)


async def _approval(rt: Runtime, st: CallState) -> Any:
    record = st.record
    waiting = record is not None and record.status is CallStatus.AWAITING_APPROVAL
    # A call refused after a person decided on it (rate-limited once approved, or denied)
    # keeps that decision: the approval still lets it run, the denial still stands.
    decided = record is not None and record.status in (CallStatus.REJECTED, CallStatus.CANCELLED)
    if record is not None and record.approval_id and (waiting or decided):
        found = await rt.approvals.get(record.approval_id)
        check = rt.approvals.check(found, binding(rt, st)) if found is not None else None
        if found is None:
            if waiting:
                raise _refuse(ErrorCode.INTERNAL_ERROR, "the approval request disappeared")
            # (a refused call whose request is gone: evaluated afresh)
        elif check is ApprovalCheck.GRANTED:
            st.approval = found
            return None
        elif check is ApprovalCheck.PENDING:
            return approval_pending_result(st, found)
        elif check is ApprovalCheck.DENIED:
            raise _refuse(
                ErrorCode.APPROVAL_DENIED,
                f"a person denied this call: {found.note or 'no reason given'}",
                approval_id=found.id,
            )
        elif check is ApprovalCheck.EXPIRED:
            if waiting:
                if found.status is ApprovalStatus.PENDING:
                    # Recorded, so that a person's decision landing later is refused, not
                    # told it approved a call that was refused as expired.
                    await rt.approvals.expire(found.id)
                raise _refuse(
                    ErrorCode.APPROVAL_EXPIRED,
                    "the approval request expired; propose the call again to ask anew",
                    approval_id=found.id,
                )
        elif found.status is ApprovalStatus.PENDING:
            # Never usable for this call: the tool changed since (a rolling deploy: a request
            # approved for the version another process serves). A record still waiting for
            # it, or for one withdrawn, waits for the new request (`run.hold_for_approval`).
            await rt.approvals.withdraw(found.id, reason=_TOOL_CHANGED)
    if st.approval_reason is None:
        return None
    from .run import hold_for_approval

    # Shielded: a request whose call was cancelled before it was recorded would wait for a
    # person for nothing (and approving it would run nothing).
    with anyio.CancelScope(shield=True):
        requested = await rt.approvals.request(
            binding(rt, st), arguments=st.redacted, reason=st.approval_reason
        )
        held = await hold_for_approval(rt, st, requested)
    return held


def budget(rt: Runtime, st: CallState) -> Any:
    """7. Call budgets per task and tool, and the principal's rate limit."""
    return None if rt.budgets is None else _budget(rt, st)


async def _budget(rt: Runtime, st: CallState) -> Any:
    limits = rt.budgets
    assert st.tool is not None and limits is not None
    store = rt.store()
    task, tool, tenant = st.call.task_id, st.tool.spec.name, st.principal.tenant
    # A task id is the tenant's own: another tenant's task of the same id ("default") is
    # another task.
    # (budget, its limit, its place in Runtime.reserved, what it counts, what the model reads)
    budgets: list[tuple[str, int, tuple[str, str, str | None], int, str]] = []
    # A call run again (it was cancelled) reuses a record the ledger counts already: it is not
    # one more call, and holds its place without a reservation.
    counted = st.record is not None and st.record.status in COUNTED_STATUSES
    if limits.max_calls_per_task is not None and not counted:
        used = await store.count_calls(task, statuses=COUNTED_STATUSES, tenant=tenant)
        budgets.append(
            ("calls_per_task", limits.max_calls_per_task, (tenant, task, None), used, "calls")
        )
    tool_limit = limits.tool_limit(tool)
    if tool_limit is not None and not counted:
        used = await store.count_calls(task, tool=tool, statuses=COUNTED_STATUSES, tenant=tenant)
        budgets.append(
            ("calls_per_tool_per_task", tool_limit, (tenant, task, tool), used, f"calls of {tool}")
        )
    # From here to the reservation nothing awaits: calls of this process that passed this gate
    # but are not in the ledger yet hold their place, so concurrent calls cannot all pass.
    for name, limit, key, used, what in budgets:
        if used + rt.reserved.get(key, 0) >= limit:
            raise _refuse(
                ErrorCode.BUDGET_EXCEEDED,
                f"this task has used its budget of {limit} {what}",
                budget=name,
                limit=limit,
            )
    for _, _, key, _, _ in budgets:
        rt.reserved[key] = rt.reserved.get(key, 0) + 1
    st.reserved = tuple(key for _, _, key, _, _ in budgets)
    if limits.calls_per_minute is not None and rt.limiter is not None:
        try:
            wait = await rt.limiter.acquire(
                rate_key(st.principal), per_minute=limits.calls_per_minute, burst=limits.burst
            )
        except Exception as exc:  # a limiter that cannot answer fails closed, like a rule
            _log.warning("the rate limiter failed: %s: %s", type(exc).__name__, exc)
            raise CallRefused(
                ToolError.of(
                    ErrorCode.RATE_LIMITED,
                    "the rate limiter could not be reached, so the call was not run; "
                    "try again shortly",
                    retryable=True,
                    details={"limiter": "unavailable"},
                )
            ) from exc
        if wait is not None:
            # Rounded up: a client that waits exactly `retry_after` must find a token.
            after = math.ceil(wait * 1000) / 1000 if math.isfinite(wait) else wait
            raise CallRefused(
                ToolError.of(
                    ErrorCode.RATE_LIMITED,
                    # (the wait the client is told, as `retry_after` says it: not "0.0 s")
                    f"rate limit reached; retry in {after:g} s"
                    if math.isfinite(after)
                    else "rate limit reached; this rate allows no more calls",
                    retry_after=after,
                    details={"limit_per_minute": limits.calls_per_minute},
                )
            )
    return None
