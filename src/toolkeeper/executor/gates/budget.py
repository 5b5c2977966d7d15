"""7. Budget: call budgets per task and tool, and the principal's rate limit."""

from __future__ import annotations

import logging
import math

from ...core.errors import CallRefused, ErrorCode, ToolError
from ...policy.budgets import COUNTED_STATUSES, rate_key
from ..runtime import Runtime
from ..state import CallState
from ..steps import Answer, Step, refuse

__all__ = ["budget"]

_log = logging.getLogger("toolkeeper")


def budget(rt: Runtime, st: CallState) -> Answer:
    """Budgets are counted in the ledger, with the places of this process's calls that passed
    this gate and are not recorded yet; a rate limiter that cannot answer refuses (fail closed)."""
    return None if rt.budgets is None else _budget(rt, st)


async def _budget(rt: Runtime, st: CallState) -> Step:
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
            raise refuse(
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
