"""Batches: independent calls run concurrently, calls that write a same resource one at a time.

A call holds its resources until it ends, and a call that outlives its timeout ends there
(UNKNOWN_OUTCOME, for a write), though its effect may still be under way: a sync function runs
on in its thread, an upstream server goes on with the request. The next write to the resource
may then overlap it. Holding the resource until that effect really ends is not done: no one
can tell when an upstream's does, a sync function that hangs would block every later write to
the resource for as long as the process lives (waiting for a resource has no timeout), and
`execute` takes no resources at all. An unknown outcome is settled by reconciling it
(`Keeper.reconcile`), not by waiting.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from ..core.errors import ErrorCode, ToolError
from ..core.states import CallStatus
from ..core.values import ToolCall, ToolResult
from ..policy.grants import may_use
from .runtime import Runtime

__all__ = ["Resources"]


class Resources:
    """The locks of the resources written by the calls of this process's batches."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._locks: dict[str, anyio.Lock] = {}

    async def run_all(
        self, calls: Sequence[ToolCall], execute: Callable[[ToolCall], Awaitable[ToolResult]]
    ) -> list[ToolResult]:
        """`execute` each call concurrently, each holding the resources it writes; results in
        the order of `calls`."""
        results: list[ToolResult | None] = [None] * len(calls)

        async def one(index: int, call: ToolCall) -> None:
            keys = self.written(call)
            held: list[anyio.Lock] = []
            try:
                for key in keys:
                    # (looked up when its turn comes: one looked up sooner may be dropped
                    # and made anew meanwhile, and two calls would hold the same resource)
                    lock = self._locks.setdefault(key, anyio.Lock())
                    await lock.acquire()
                    held.append(lock)
                results[index] = await execute(call)
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
        return [r if r is not None else _no_result(c) for r, c in zip(results, calls, strict=True)]

    def written(self, call: ToolCall) -> list[str]:
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


def _no_result(call: ToolCall) -> ToolResult:
    error = ToolError.of(ErrorCode.INTERNAL_ERROR, "no result")
    return ToolResult(call_id=call.call_id, tool=call.name, status=CallStatus.FAILED, error=error)
