"""Signals a tool raises to ask the runtime for something. They are not failures.

- `ApprovalRequired`: stop; ask a person to approve *these exact arguments*; the call ends as
  AWAITING_APPROVAL with APPROVAL_REQUIRED and runs once approved. Raise it before any effect.
- `RetryLater`: this attempt failed in a way worth retrying (a 429, a lock held). The runtime
  retries only if the tool is read-only or idempotent, and only when `after` is within its
  retry policy's `max_interval`; otherwise the call fails with `retryable=True` (and
  `retry_after`) so that the model or a person may propose it again.
- `ToolFailed`: the tool ran and reports a failure that is safe to show to the model.
- `OutcomeUnknown`: the request left, but no answer came back (a connection dropped mid-call).
  A read-only or idempotent tool is retried; any other call ends UNKNOWN_OUTCOME and waits
  for reconciliation, never for a blind replay.

Any other exception becomes TOOL_ERROR with a generic message: internal details never reach
the model. What a signal says (a message, details, a reason) is shown with the call's
sensitive argument values masked (see `observe.redact`), so a tool quoting its password in a
failure does not hand it to the model, the ledger or the audit log.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import ErrorCode

__all__ = [
    "PIPELINE_CODES",
    "ApprovalRequired",
    "OutcomeUnknown",
    "RetryLater",
    "ToolFailed",
    "ToolSignal",
]


class ToolSignal(Exception):
    """Base class of what a tool raises on purpose."""


class ApprovalRequired(ToolSignal):
    """Ask for a person's approval of this exact call before it runs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RetryLater(ToolSignal):
    """This attempt failed transiently; `after` seconds is a sensible wait, when known."""

    def __init__(self, reason: str, *, after: float | str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = _seconds(after)
        """The wait in seconds; None when `after` was not a number of seconds (a
        Retry-After header's text "2" is taken, a date or "soon" is not)."""


def _seconds(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


PIPELINE_CODES = frozenset(
    {
        ErrorCode.APPROVAL_REQUIRED,
        ErrorCode.APPROVAL_DENIED,
        ErrorCode.APPROVAL_EXPIRED,
        ErrorCode.BUDGET_EXCEEDED,
        ErrorCode.CALL_ID_CONFLICT,
        ErrorCode.CALL_IN_PROGRESS,
        ErrorCode.CANCELLED,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.INVALID_CALL_ID,
        ErrorCode.PAYLOAD_TOO_LARGE,
        ErrorCode.TIMEOUT,
        ErrorCode.UNKNOWN_OUTCOME,
    }
)
"""Codes only the pipeline says (a tool claiming one would mislead: an approval without a
request, an unknown outcome nobody is asked to reconcile)."""


class ToolFailed(ToolSignal):
    """The tool reports a failure whose message is safe to show to the model.

    Args:
        message: What the model reads.
        retryable: Whether trying again may succeed (default: as `code`'s row of the error
            table says; TOOL_ERROR's: no).
        details: Facts for the model and the ledger.
        code: The stable code, when TOOL_ERROR would say less (a discovery tool asked for a
            tool that does not exist says UNKNOWN_TOOL). Codes the pipeline owns (approvals,
            budgets, timeouts, unknown outcomes...) are refused.

    Raises:
        ValueError: `code` is no error code, or one the pipeline owns.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        details: Mapping[str, Any] | None = None,
        code: ErrorCode | str | None = None,
    ) -> None:
        super().__init__(message)
        known = ErrorCode(code) if code is not None else None
        if known in PIPELINE_CODES:
            raise ValueError(f"a tool cannot report {known}: only the pipeline says it")
        self.message = message
        self.retryable = retryable
        self.details = dict(details or {})
        self.code = known


class OutcomeUnknown(ToolSignal):
    """The request may have reached the tool, but whether it took effect is not known."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
