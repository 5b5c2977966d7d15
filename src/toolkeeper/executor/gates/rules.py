"""5. Business rules: the tool's own, then the keeper's; a destructive tool needs approval
unless a rule waives it."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import anyio

from ...core.errors import CallRefused, ErrorCode, ToolError
from ...core.values import Effect
from ...observe.redact import log_exception, mask
from ...policy.rules import Decision, ParameterMissing, RuleInput, Verdict
from ..runtime import Runtime
from ..state import CallState
from ..steps import Answer, Step, refuse

__all__ = ["rules"]

_log = logging.getLogger("toolkeeper")


def rules(rt: Runtime, st: CallState) -> Answer:
    """A rule that fails, or answers anything but a `Decision`, refuses the call (fail closed)."""
    assert st.tool is not None
    if st.tool.rules or rt.rules:
        return _rules(rt, st)
    _default_approval(st)
    return None


async def _rules(rt: Runtime, st: CallState) -> Step:
    assert st.tool is not None and st.validated is not None
    own = len(st.tool.rules)
    inp = RuleInput(spec=st.tool.spec, arguments=st.validated, principal=st.principal, call=st.call)
    for index, rule in enumerate((*st.tool.rules, *rt.rules)):
        try:
            decision: Decision | None = rule(inp)
            if inspect.isawaitable(decision):
                # A rule that asks a service which never answers would hold the call, and
                # every proposal of its id, for ever: it has the tool's time.
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
    return refuse(
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
