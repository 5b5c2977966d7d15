"""Budgets and rate limits, enforced before a call runs.

- Call budgets count the calls of a task that ran or run (from the ledger, so they hold across
  restarts and processes): at most N per task, at most M per tool per task. Exceeding one is
  BUDGET_EXCEEDED: retrying the same task will not help.
- Rate limits are per principal. `calls_per_minute=N` alone lets at most N calls through in
  any 60 seconds (all N at once if they come at once; a rate under one a minute, one call per
  60/N seconds); with an explicit `burst=B` it is a token bucket instead: B calls at once,
  then N a minute as tokens come back (so up to B + N in one minute). Exceeding one is
  RATE_LIMITED with `retry_after`: the same call can succeed later. The in-process limiter is
  the default; a shared one (Redis) implements the same `RateLimiter` Protocol.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..core.states import CallStatus
from ..core.values import Principal, is_count, is_positive

__all__ = [
    "COUNTED_STATUSES",
    "Budgets",
    "MemoryRateLimiter",
    "RateLimiter",
    "rate_key",
    "window_of",
]

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
    """Calls one principal may make in any minute: at most this many (rounded down) in any 60
    seconds, or, below one, one call per 60/N seconds."""
    burst: int | None = None
    """None (default): `calls_per_minute` is a window, as above. A number B: a token bucket
    instead, B calls at once, then `calls_per_minute` a minute as tokens come back (so up
    to B + N in one minute): for a high rate, whose window would remember each call of the
    last minute, or to let a principal save up calls."""

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
        if self.burst is not None and not is_count(self.burst, 1):
            raise ValueError("Budgets.burst must be a whole number of calls (1 or more)")

    def tool_limit(self, tool: str) -> int | None:
        """The per-task limit for one tool."""
        return self.per_tool.get(tool, self.max_calls_per_tool_per_task)


def rate_key(principal: Principal) -> str:
    """The bucket of a principal: its own in its tenant (ids are unique per tenant only)."""
    return f"{len(principal.tenant)}:{principal.tenant}:{principal.id}"


def window_of(per_minute: float) -> tuple[int, float]:
    """The window of a rate without a burst: (at most this many calls, in any this many
    seconds); none at a rate of 0 (the Protocol's callers may pass one)."""
    if per_minute <= 0:
        return 0, math.inf
    if per_minute >= 1:
        return int(per_minute), 60.0
    return 1, 60.0 / per_minute


class RateLimiter(Protocol):
    """Lets one call of a principal through, or says how long until one may go."""

    async def acquire(self, key: str, *, per_minute: float, burst: int | None) -> float | None:
        """Count a call for `key`; None when it may go, else seconds until one may.

        With `burst` None, at most `window_of(per_minute)` calls go in any window; else a
        token bucket of `burst` tokens refilled at `per_minute`.
        """
        ...


_SWEEP_AT = 1024
"""Buckets and windows the in-process limiter holds before it first forgets the idle ones."""


def _seconds(tokens: float, rate: float) -> float:
    """How long `tokens` take to come back at `rate` per second (never, at a rate of 0)."""
    return tokens / rate if rate > 0 else math.inf


class MemoryRateLimiter:
    """Windows and token buckets in this process. A bucket that has filled up again, or a
    window whose calls are all past, is forgotten (it and none are the same), as Redis lets its
    keys expire: one per principal ever seen would grow without end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float, float]] = {}
        """Tokens, when they were counted, and when the bucket is full again, by key."""
        self._windows: dict[str, tuple[deque[float], float]] = {}
        """When the calls of the window were let through, oldest first, and its length."""
        self._sweep_at = _SWEEP_AT

    async def acquire(self, key: str, *, per_minute: float, burst: int | None) -> float | None:
        now = self._clock()
        wait = (
            self._bucket(key, per_minute, burst, now)
            if burst is not None
            else self._window(key, now, per_minute)
        )
        if len(self._buckets) + len(self._windows) >= self._sweep_at:
            # Sweeps are rare: each waits until the buckets kept have doubled.
            self._buckets = {k: b for k, b in self._buckets.items() if b[2] > now}
            self._windows = {
                k: w for k, w in self._windows.items() if w[0] and w[0][-1] > now - w[1]
            }
            self._sweep_at = max(_SWEEP_AT, 2 * (len(self._buckets) + len(self._windows)))
        return wait

    def _window(self, key: str, now: float, per_minute: float) -> float | None:
        limit, seconds = window_of(per_minute)
        if limit == 0:
            return math.inf
        window = self._windows.get(key)
        calls: deque[float] = window[0] if window is not None else deque()
        if calls and calls[-1] > now:
            # A clock that stepped back: the calls "to come" count as made now, not for as
            # long as the clock went back.
            calls = deque(min(at, now) for at in calls)
        while calls and calls[0] <= now - seconds:
            calls.popleft()
        self._windows[key] = (calls, seconds)
        if len(calls) >= limit:
            return calls[len(calls) - limit] + seconds - now
        calls.append(now)
        return None

    def _bucket(self, key: str, per_minute: float, burst: int, now: float) -> float | None:
        rate = per_minute / 60.0
        tokens, last, _ = self._buckets.get(key, (float(burst), now, now))
        # A clock that stepped back refills nothing: it must not take tokens either.
        tokens = min(float(burst), tokens + max(0.0, now - last) * rate)
        wait = None if tokens >= 1.0 else _seconds(1.0 - tokens, rate)
        if wait is None:
            tokens -= 1.0
        self._buckets[key] = (tokens, now, now + _seconds(burst - tokens, rate))
        return wait
