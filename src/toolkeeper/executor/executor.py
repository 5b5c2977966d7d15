"""The executor: one pipeline for every call, and parallel batches.

```
admit: dedupe → lookup → authorize → validate → rules → approval → budget
attempts: RUNNING (a write) → attempt, retry → end        journal: every record write
```
Every refusal comes back as a `ToolResult` with a stable code; `execute` never raises for bad
input, and a call never stays RUNNING because of one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..core.errors import CallRefused, ErrorCode, StoreError, ToolError
from ..core.states import CallStatus
from ..core.values import ToolCall, ToolResult
from ..observe.redact import log_exception
from . import attempts, gates, journal
from .admit import admit
from .batch import Resources
from .journal import LEDGER_UNAVAILABLE, LostRace
from .runtime import Runtime
from .state import CallState
from .steps import Abandoned, Gate, Hold
from .turns import BUSY, Turns

__all__ = ["Executor", "build_pipeline"]

_log = logging.getLogger("toolkeeper")
_MAX_REENTRIES = 5


def build_pipeline() -> tuple[Gate, ...]:
    """The gates every call passes, in DESIGN.md's order."""
    return (
        gates.dedupe,
        gates.lookup,
        gates.authorize,
        gates.validate,
        gates.rules,
        gates.approval,
        gates.budget,
    )


class Executor:
    """Runs proposed calls through the pipeline."""

    def __init__(self, runtime: Runtime, pipeline: Sequence[Gate] | None = None) -> None:
        self.runtime = runtime
        self.pipeline = tuple(pipeline) if pipeline is not None else build_pipeline()
        self._turns = Turns()
        self._resources = Resources(runtime)

    async def execute(self, call: ToolCall) -> ToolResult:
        """Check, run and record one call; always returns a result.

        Proposals of one call id in this process go one at a time (`Turns`); a pass through
        the gates that loses a race to another process starts over, at most five times.
        """
        rt = self.runtime
        key = self._turns.take(call)
        if key is BUSY:
            key = await self._turns.wait(call)
        tel = rt.telemetry
        trace = tel.start(call, call.principal or rt.principal) if tel is not None else None
        result: ToolResult | None = None
        try:
            principal = call.principal or rt.principal
            if principal is None:
                result = _answer(call, CallStatus.REJECTED, _NO_PRINCIPAL)
                return result
            st = CallState(call, principal, trace=trace)
            while True:
                try:
                    step = await admit(rt, st, self.pipeline)
                    if step is None:
                        result = await attempts.run(rt, st)
                    elif isinstance(step, Hold):
                        result = await journal.hold(rt, st, step.reason)
                    elif isinstance(step, Abandoned):
                        await journal.mark_unknown(rt, step.record)
                        raise LostRace
                    else:
                        result = step
                    return result
                except LostRace:
                    if st.reentries >= _MAX_REENTRIES:
                        result = _internal(call, "the call kept changing under concurrent updates")
                        return result
                    st = st.anew()
                except CallRefused as refused:
                    try:
                        result = await journal.refuse(rt, st, refused.error)
                        return result
                    except LostRace:
                        if st.reentries >= _MAX_REENTRIES:
                            # (the refusal stands; only its record is missing)
                            _log.error("a refusal of %s could not be recorded", call.name)
                            result = _answer(call, CallStatus.REJECTED, refused.error)
                            return result
                        st = st.anew()
                    except Exception:
                        log_exception(_log, st.hidden(), "recording a refusal failed")
                        result = _answer(call, CallStatus.REJECTED, refused.error)
                        return result
                except StoreError as exc:  # (after an effect, `attempts.run` answers itself)
                    _log.error("the ledger failed on a call of %r: %s", call.name, exc)
                    result = _answer(call, CallStatus.FAILED, LEDGER_UNAVAILABLE)
                    return result
                except Exception:
                    log_exception(_log, st.hidden(), "internal error executing %r", call.name)
                    result = _internal(call, "an internal error stopped the call")
                    return result
        finally:
            self._turns.give_back(key)
            if trace is not None:  # (None, result None: cancelled or interrupted)
                trace.ended(result)

    async def execute_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run independent calls concurrently; calls that write a same resource one at a time.

        Results come back in the order of `calls`; a failure of one call never affects
        another's result. See `batch.Resources` for what a write holds, and for how long.
        """
        return await self._resources.run_all(calls, self.execute)


_NO_PRINCIPAL = ToolError.of(
    ErrorCode.PERMISSION_DENIED,
    "this call names no principal to act for, and the keeper has no default one; nothing ran",
    details={"principal": None},
)
"""The refusal of a call that names no principal on a keeper given none: it is nobody's, so
it is not recorded (see `Keeper`'s `principal`)."""


def _internal(call: ToolCall, message: str) -> ToolResult:
    return _answer(call, CallStatus.FAILED, ToolError.of(ErrorCode.INTERNAL_ERROR, message))


def _answer(call: ToolCall, status: CallStatus, error: ToolError) -> ToolResult:
    return ToolResult(call_id=call.call_id, tool=call.name, status=status, error=error)
