"""The executor: one visible pipeline of gates, then run and record; and parallel batches.

```
dedupe → lookup → authorize → validate → rules → approval → budget → run (ledger RUNNING →
execute → retry → record)
```
Every refusal comes back as a `ToolResult` with a stable code; `execute` never raises for bad
input, and a call never stays RUNNING because of one.

The common call takes a short way to the same end (`gates.express`): a read-only tool with no
rule or budget to consult, whose arguments are valid, passes gates 2-7 without waiting, so all
that is left before it runs is dedupe's ledger read. The order is the pipeline's in effect: a
gate that would refuse, or wait, sends the call down the pipeline from its first gate, and so
does a ledger that holds the call already. Tests hold the two ways to the same results,
records and audit events (tests/executor/test_express.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import anyio

from ..core.errors import CallRefused, ErrorCode, StoreError, ToolError
from ..core.states import CallStatus
from ..core.values import ToolCall, ToolResult
from ..observe.redact import log_exception
from ..policy.grants import may_use
from . import gates
from .gates import Gate
from .run import LEDGER_UNAVAILABLE, LostRace, record_refusal, run_call
from .runtime import Runtime
from .state import CallState

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
        self._express = self.pipeline == build_pipeline()
        """Whether a common call may pass the default gates at once (`gates.express`)."""
        self._locks: dict[str, anyio.Lock] = {}
        self._in_flight: dict[tuple[str, str], anyio.Event | None] = {}

    async def execute(self, call: ToolCall) -> ToolResult:
        """Check, run and record one call; always returns a result.

        Proposals of one call id in this process go one at a time: a second waits for the
        first to end, then dedupe hands it the recorded result (or a conflict). Without that,
        both could pass the gates before either is recorded: a read-only tool ran twice, and
        the second counted against the task's budget as another call.
        """
        in_flight = self._in_flight
        key: tuple[str, str] | None = (call.task_id, call.call_id)
        try:
            if key in in_flight:
                await self._turn(key)
        except TypeError:  # an id that is not text (unhashable): the pipeline refuses it
            key = None
        if key is not None:
            in_flight[key] = None
        try:
            principal = call.principal or self.runtime.principal
            if principal is None:
                return _refused(call, _NO_PRINCIPAL)
            quick: CallState | None = None
            if self._express:
                try:
                    quick = gates.express(self.runtime, call, principal)
                except Exception:  # (the gates meet it again, and answer for it)
                    quick = None
            st = quick or CallState(call=call, principal=principal)
            while True:
                try:
                    if st.express:  # every gate has passed but dedupe's ledger read
                        st.express = False
                        if await self.runtime.store().get_call(call.task_id, call.call_id) is None:
                            return await run_call(self.runtime, st)
                        st = CallState(call=call, principal=principal)  # (each gate anew)
                    return await self._pipeline(st)
                except LostRace:
                    self.runtime.release(st)
                    if st.reentries >= _MAX_REENTRIES:
                        return _internal(call, "the call kept changing under concurrent updates")
                    st = CallState(call=call, principal=st.principal, reentries=st.reentries + 1)
                except CallRefused as refused:
                    self.runtime.release(st)
                    try:
                        return await record_refusal(self.runtime, st, refused.error)
                    except LostRace:
                        if st.reentries >= _MAX_REENTRIES:
                            # (the refusal stands; only its record is missing)
                            _log.error("a refusal of %s could not be recorded", call.name)
                            return _refused(call, refused.error)
                        st = CallState(
                            call=call, principal=st.principal, reentries=st.reentries + 1
                        )
                    except Exception:
                        log_exception(_log, st.hidden(), "recording a refusal failed")
                        return _refused(call, refused.error)
                except StoreError as exc:  # (after an effect, `run_call` answers itself)
                    _log.error("the ledger failed on a call of %r: %s", call.name, exc)
                    return _failed(call, LEDGER_UNAVAILABLE)
                except Exception:
                    log_exception(_log, st.hidden(), "internal error executing %r", call.name)
                    return _internal(call, "an internal error stopped the call")
                finally:
                    if st.reserved:
                        self.runtime.release(st)
        finally:
            if key is not None:
                event = in_flight.pop(key, None)
                if event is not None:
                    event.set()

    async def _turn(self, key: tuple[str, str]) -> None:
        """Wait until no other proposal of this call id is in flight here."""
        while key in self._in_flight:
            event = self._in_flight[key]
            if event is None:
                event = self._in_flight[key] = anyio.Event()
            await event.wait()

    async def _pipeline(self, st: CallState) -> ToolResult:
        rt = self.runtime
        for gate in self.pipeline:
            result = gate(rt, st)
            if result is None:
                continue
            if not isinstance(result, ToolResult):
                result = await result
                if result is None:
                    continue
            return result  # type: ignore[no-any-return]
        return await run_call(rt, st)

    async def execute_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run independent calls concurrently; calls that write a same resource one at a time.

        Results come back in the order of `calls`; a failure of one call never affects
        another's result.

        A call holds its resources until it ends, and a call that outlives its timeout ends
        there (UNKNOWN_OUTCOME, for a write), though its effect may still be under way: a sync
        function runs on in its thread, an upstream server goes on with the request. The next
        write to the resource may then overlap it. Holding the resource until that effect
        really ends is not done: no one can tell when an upstream's does, a sync function
        that hangs would block every later write to the resource for as long as the process
        lives (waiting for a resource has no timeout), and `execute` takes no resources at
        all. An unknown outcome is settled by reconciling it (`Keeper.reconcile`), not by
        waiting.
        """
        results: list[ToolResult | None] = [None] * len(calls)

        async def one(index: int, call: ToolCall) -> None:
            keys = self._resources(call)
            held: list[anyio.Lock] = []
            try:
                for key in keys:
                    # (looked up when its turn comes: one looked up sooner may be dropped
                    # and made anew meanwhile, and two calls would hold the same resource)
                    lock = self._locks.setdefault(key, anyio.Lock())
                    await lock.acquire()
                    held.append(lock)
                results[index] = await self.execute(call)
            finally:
                # Cancelled while waiting for a later resource, a call still gives back those
                # it holds: kept, they would block every later write to them.
                for lock in reversed(held):
                    lock.release()
                for key in keys:
                    left = self._locks.get(key)
                    if (
                        left is not None
                        and not left.locked()
                        and not left.statistics().tasks_waiting
                    ):
                        del self._locks[key]

        async with anyio.create_task_group() as tg:
            for index, call in enumerate(calls):
                tg.start_soon(one, index, call)
        return [
            r if r is not None else _internal(c, "no result")
            for r, c in zip(results, calls, strict=True)
        ]

    def _resources(self, call: ToolCall) -> list[str]:
        """Sorted resource keys a call writes (sorted, so locks are always taken in order);
        none for a call to a tool its principal may not use: it is refused as a call to no
        tool, and must not wait for others' writes to it either (its wait would tell)."""
        tool = self.runtime.catalog.get(call.name)
        principal = call.principal or self.runtime.principal
        if (
            tool is None
            or not tool.spec.has_side_effects
            or principal is None
            or not may_use(principal, tool.spec)
        ):
            return []
        if tool.writes is None:
            return [f"tool:{tool.spec.name}"]
        arguments: Any = call.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return []
        if not isinstance(arguments, dict):
            return []
        try:
            named = tool.writes(arguments)
        except Exception:
            return [f"tool:{tool.spec.name}"]
        if named is None:
            return []
        keys = [named] if isinstance(named, str) else list(named)
        return sorted({f"resource:{k}" for k in keys})


_NO_PRINCIPAL = ToolError.of(
    ErrorCode.PERMISSION_DENIED,
    "this call names no principal to act for, and the keeper has no default one; nothing ran",
    details={"principal": None},
)
"""The refusal of a call that names no principal on a keeper given none: it is nobody's, so
it is not recorded (see `Keeper`'s `principal`)."""


def _refused(call: ToolCall, error: ToolError) -> ToolResult:
    return ToolResult(call_id=call.call_id, tool=call.name, status=CallStatus.REJECTED, error=error)


def _internal(call: ToolCall, message: str) -> ToolResult:
    return _failed(call, ToolError.of(ErrorCode.INTERNAL_ERROR, message))


def _failed(call: ToolCall, error: ToolError) -> ToolResult:
    return ToolResult(call_id=call.call_id, tool=call.name, status=CallStatus.FAILED, error=error)
