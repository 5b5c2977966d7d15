"""Retry semantics as data: how often and how long to wait, never *whether* a side effect may
be repeated. That is decided by the tool's declared effect (see `ToolSpec.retry_safe`)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .errors import ErrorCode, ToolError
from .values import is_count

__all__ = ["NO_RETRY", "RetryPolicy"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """When a retryable failure of a retry-safe tool is tried again."""

    initial_interval: float = 0.2
    """Seconds before the first retry."""
    backoff: float = 2.0
    """Each further wait is this many times the previous one."""
    max_interval: float = 10.0
    """No wait is longer than this."""
    max_attempts: int = 3
    """Attempts in all, the first included; 1 means never retry."""
    jitter: float = 0.2
    """Each wait is spread at random by up to this fraction, to avoid retry storms."""
    non_retryable: frozenset[ErrorCode] = frozenset()
    """Codes never retried, even when the error says it is retryable."""

    def __post_init__(self) -> None:
        checks = (
            ("initial_interval", 0 <= self.initial_interval < math.inf),
            ("backoff", self.backoff >= 1),
            ("max_interval", 0 <= self.max_interval < math.inf),
            # (inf attempts would retry without end; 0 or 2.5 say nothing a call can do)
            ("max_attempts", is_count(self.max_attempts, 1)),
            ("jitter", 0 <= self.jitter <= 1),
        )
        for name, ok in checks:
            if not ok:  # NaN fails every comparison, so it lands here too
                raise ValueError(
                    f"RetryPolicy.{name} = {getattr(self, name)!r} is out of range (waits are "
                    "finite and not negative, attempts a whole number from 1, backoff is at "
                    "least 1, jitter within 0..1)"
                )

    def should_retry(self, error: ToolError, attempt: int) -> bool:
        """Whether attempt number `attempt` (1-based) that failed with `error` is retried."""
        return (
            error.retryable and error.code not in self.non_retryable and attempt < self.max_attempts
        )

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        try:
            grown = self.initial_interval * self.backoff ** (attempt - 1)
        except OverflowError:
            grown = self.max_interval
        base = min(self.max_interval, grown)
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1.0 + spread))


NO_RETRY = RetryPolicy(max_attempts=1)
"""One attempt, never retried."""
