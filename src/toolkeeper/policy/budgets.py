"""Budgets and rate limits, enforced before a call runs.

- Call budgets count the calls of a task that ran or run (from the ledger, so they hold across
  restarts and processes): at most N per task, at most M per tool per task. Exceeding one is
  BUDGET_EXCEEDED: retrying the same task will not help.
- Rate limits are token buckets per principal (calls per minute, with a burst). Exceeding one
  is RATE_LIMITED with `retry_after`: the same call can succeed later. The in-process limiter
  is the default; a shared one (Redis) implements the same `RateLimiter` Protocol.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..core.states import CallStatus
from ..core.values import Principal, is_count, is_positive

__all__ = ["COUNTED_STATUSES", "Budgets", "MemoryRateLimiter", "RateLimiter", "rate_key"]

COUNTED_STATUSES: tuple[CallStatus, ...] = (
    CallStatus.RUNNING,
    CallStatus.SUCCEEDED,
    CallStatus.FAILED,
    CallStatus.TIMED_OUT,
    CallStatus.CANCELLED,
    CallStatus.UNKNOWN_OUTCOME,
)
"""States of calls that count against a budget: those that started running."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Budgets:
    """Limits on how much a task and a principal may call."""

    max_calls_per_task: int | None = None
    """Calls one task may run in all."""
    max_calls_per_tool_per_task: int | None = None
    """Calls one task may run of any one tool."""
    per_tool: Mapping[str, int] = field(default_factory=dict)
    """Per-tool overrides of `max_calls_per_tool_per_task`, by tool name."""
    calls_per_minute: float | None = None
    """Sustained calls per minute one principal may make."""
    burst: int = 10
    """Calls a principal may make at once before the per-minute rate applies."""

    def __post_init__(self) -> None:
        counts = {
            "max_calls_per_task": self.max_calls_per_task,
            "max_calls_per_tool_per_task": self.max_calls_per_tool_per_task,
            **{f"per_tool[{name!r}]": limit for name, limit in self.per_tool.items()},
        }
        for name, limit in counts.items():
            if limit is not None and not is_count(limit, 0):
                raise ValueError(f"Budgets.{name} must be a whole number of calls (0 or more)")
        rate = self.calls_per_minute
        if rate is not None and not is_positive(rate):
            raise ValueError("Budgets.calls_per_minute must be a positive number")
        if not is_count(self.burst, 1):
            raise ValueError("Budgets.burst must be a whole number of calls (1 or more)")

    def tool_limit(self, tool: str) -> int | None:
        """The per-task limit for one tool."""
        return self.per_tool.get(tool, self.max_calls_per_tool_per_task)


def rate_key(principal: Principal) -> str:
    """The bucket of a principal: its own in its tenant (ids are unique per tenant only)."""
    return f"{len(principal.tenant)}:{principal.tenant}:{principal.id}"


class RateLimiter(Protocol):
    """Takes one token from a bucket, or says how long until one is free."""

    async def acquire(self, key: str, *, per_minute: float, burst: int) -> float | None:
        """Take a token for `key`; None when taken, else seconds until a token is free."""
        ...


_SWEEP_AT = 1024
"""Buckets the in-process limiter holds before it first forgets the full ones."""


def _seconds(tokens: float, rate: float) -> float:
    """How long `tokens` take to come back at `rate` per second (never, at a rate of 0)."""
    return tokens / rate if rate > 0 else math.inf


class MemoryRateLimiter:
    """Token buckets in this process. A bucket that has filled up again is forgotten (a full
    bucket and none are the same), as Redis lets its keys expire: one bucket per principal
    ever seen would grow without end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float, float]] = {}
        """Tokens, when they were counted, and when the bucket is full again, by key."""
        self._sweep_at = _SWEEP_AT

    async def acquire(self, key: str, *, per_minute: float, burst: int) -> float | None:
        rate = per_minute / 60.0
        now = self._clock()
        tokens, last, _ = self._buckets.get(key, (float(burst), now, now))
        # A clock that stepped back refills nothing: it must not take tokens either.
        tokens = min(float(burst), tokens + max(0.0, now - last) * rate)
        wait = None if tokens >= 1.0 else _seconds(1.0 - tokens, rate)
        if wait is None:
            tokens -= 1.0
        self._buckets[key] = (tokens, now, now + _seconds(burst - tokens, rate))
        if len(self._buckets) >= self._sweep_at:
            # Sweeps are rare: each waits until the buckets kept have doubled.
            self._buckets = {k: b for k, b in self._buckets.items() if b[2] > now}
            self._sweep_at = max(_SWEEP_AT, 2 * len(self._buckets))
        return wait
