"""What a gate answers: go on, answer the call now, or hand it to the journal.

A gate is `(rt, st) -> Step`, or a coroutine of one when it must wait (for the ledger, a rule,
a limiter). A gate with nothing to wait for answers directly, so most calls pass most gates
without making a coroutine. A gate refuses a call by raising `CallRefused` (`refuse`), and
never writes a call record: the journal does, from what the gates answered.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from ..core.errors import CallRefused, ErrorCode, ToolError
from ..core.values import ToolResult
from ..ledger.base import CallRecord
from .runtime import Runtime
from .state import CallState

__all__ = ["Abandoned", "Answer", "Gate", "Hold", "Step", "refuse"]


@dataclass(frozen=True, slots=True)
class Hold:
    """The call needs a person's approval: the journal asks for it and holds the call."""

    reason: str
    """Why, as the person is told."""


@dataclass(frozen=True, slots=True)
class Abandoned:
    """The call's record is RUNNING, given up by its owner, and its effect may have happened:
    the journal marks it UNKNOWN_OUTCOME and the call passes the gates again."""

    record: CallRecord
    """The record as read."""


Step: TypeAlias = ToolResult | Hold | Abandoned | None
"""None: the next gate; a result: the call's answer now (a replay, a pending approval)."""


Answer: TypeAlias = Step | Coroutine[Any, Any, Step]
"""What a gate returns: a step, or a coroutine of one when it must wait."""


class Gate(Protocol):
    """One step of the pipeline (`executor.build_pipeline`)."""

    def __call__(self, rt: Runtime, st: CallState, /) -> Answer: ...


def refuse(code: ErrorCode, message: str, **details: Any) -> CallRefused:
    """The refusal of a call, to raise."""
    return CallRefused(ToolError.of(code, message, details=details))
