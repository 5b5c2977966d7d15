"""7. Budget: call budgets per task and tool, and the principal's rate limit."""

from __future__ import annotations

import logging
import math

from ...core.errors import CallRefused, ErrorCode, ToolError
from ...ledger.base import BudgetHold
from ...policy.budgets import COUNTED_STATUSES, rate_key
from ..runtime import Runtime
from ..state import CallState
from ..steps import Answer, Step, refuse

__all__ = ["budget"]

_log = logging.getLogger("toolkeeper")

_SPARE = 60.0
"""Seconds a budget hold outlives its call's every attempt and wait."""


def budget(rt: Runtime, st: CallState) -> Answer:
    """A call takes its place in its task's budgets in the ledger (`LedgerStore.hold_budget`),
    atomically across every process that shares it; a rate limiter that cannot answer
    refuses (fail closed)."""
    return None if rt.budgets is None else _budget(rt, st)


async def _budget(rt: Runtime, st: CallState) -> Step:
    limits = rt.budgets
    assert st.tool is not None and limits is not None
    tool = st.tool.spec.name
    # (limit, its budget, what the model reads)
    budgets: list[tuple[int, str | None, str, str]] = []
    # A call run again (it was cancelled) reuses a record the ledger counts already: it is not
    # one more call.
    counted = st.record is not None and st.record.status in COUNTED_STATUSES
    if limits.max_calls_per_task is not None and not counted:
        budgets.append((limits.max_calls_per_task, None, "calls_per_task", "calls"))
    tool_limit = limits.tool_limit(tool)
    if tool_limit is not None and not counted:
        budgets.append((tool_limit, tool, "calls_per_tool_per_task", f"calls of {tool}"))
    if budgets:
        now = rt.clock()
        policy = st.tool.retry or rt.retry
        # Long enough for every attempt and wait, so that only a process that died before
        # it wrote the call's record leaves a hold to expire (its place comes back then).
        lasts = (st.tool.spec.timeout + policy.max_interval) * policy.max_attempts + _SPARE
        hold = BudgetHold(
            tenant=st.principal.tenant,  # (another tenant's task of the same id is another)
            task_id=st.call.task_id,
            call_id=st.call.call_id,
            tool=tool,
            limits=tuple((scope, limit) for limit, scope, _, _ in budgets),
            counted=COUNTED_STATUSES,
            created_at=now,
            expires_at=now + lasts,
        )
        full = await rt.store().hold_budget(hold)
        if full is not None:
            limit, _, name, what = budgets[full]
            raise refuse(
                ErrorCode.BUDGET_EXCEEDED,
                f"this task has used its budget of {limit} {what}",
                budget=name,
                limit=limit,
            )
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
