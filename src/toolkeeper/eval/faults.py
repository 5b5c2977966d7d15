"""The simulated service `toolkeeper eval safety` injects faults into, and its tools.

What it is: a downstream service that counts every effect it applies, by operation (the exact
arguments it received, their types included) and by the idempotency key it was sent, and
that fails as a service may when told to: transient errors before the effect, a response lost
after it, a hang before or after it, a connection cut after it, being down. Its tools answer a
keeper's reconciliation truthfully from what it applied. What it is not: a judge; the scenarios
(`toolkeeper.eval.scenarios`) compare what it applied with what should have happened.
"""

from __future__ import annotations

import enum
import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..connectors.base import UpstreamUnavailable
from ..core.signals import OutcomeUnknown, RetryLater
from ..core.states import CallStatus
from ..core.values import CallContext, Principal, ToolResult
from ..keeper import Keeper

__all__ = [
    "AGENT",
    "INTRUDER",
    "Fault",
    "FileService",
    "Service",
    "add_file_tools",
    "add_service_tools",
    "operation",
]

AGENT = Principal(id="agent", grants=frozenset({"svc:read", "svc:write", "tools:call"}))
"""The principal whose calls are legitimate: it may read, write and ask for deletions."""
INTRUDER = Principal(id="intruder", grants=frozenset({"svc:read"}))
"""A principal that may only read; every write it proposes is unauthorized."""


class Fault(enum.Enum):
    """What one attempt of a call meets at the service."""

    TRANSIENT = "transient"
    """A retryable error (a 429) before anything is applied."""
    DOWN = "down"
    """The service cannot be reached: nothing is sent."""
    LOST = "lost"
    """Applied, then the response is lost (a 503 after the write)."""
    HANG = "hang"
    """No answer, nothing applied: the attempt's timeout ends it."""
    HANG_AFTER = "hang_after"
    """Applied, then no answer: the attempt's timeout ends it."""
    CUT = "cut"
    """Applied, then the connection ends (the upstream died mid-call)."""
    CUT_BEFORE = "cut_before"
    """The connection ends mid-call before anything was applied."""
    SLOW = "slow"
    """Applied, then answered after a moment (a slow service): time for a client to retry."""


SLOW_SECONDS = 0.05
"""How long a slow attempt takes to answer once applied."""


def operation(tool: str, arguments: dict[str, Any]) -> str:
    """The operation a call asks for: its tool and its exact arguments, types included (an
    int and a float of the same digits are two operations)."""
    return f"{tool}{sorted((k, repr(v)) for k, v in arguments.items())}"


@dataclass(kw_only=True)
class Service:
    """The effects applied, and the faults still to inject, by operation."""

    applied: Counter[str] = field(default_factory=Counter)
    """How many times each operation's effect was applied."""
    keys: dict[str, str] = field(default_factory=dict)
    """The operation each idempotency key applied."""
    plan: dict[str, list[Fault]] = field(default_factory=dict)
    """Faults still to meet, attempt by attempt, by operation."""
    met: Counter[str] = field(default_factory=Counter)
    """How many faults each operation met."""

    def inject(self, op: str, *faults: Fault) -> None:
        """Make the next attempts of `op` meet `faults`, in order (then it works)."""
        self.plan[op] = list(faults)

    async def serve(self, op: str, ctx: CallContext) -> str:
        """One attempt at `op`: apply it (or not), failing as planned."""
        faults = self.plan.get(op)
        fault = faults.pop(0) if faults else None
        if fault is not None:
            self.met[op] += 1
        if fault is Fault.TRANSIENT:
            raise RetryLater("the service is busy (429)")
        if fault is Fault.DOWN:
            raise UpstreamUnavailable("the service is down")
        if fault is Fault.HANG:
            await anyio.sleep_forever()
        if fault is Fault.CUT_BEFORE:
            raise OutcomeUnknown("the connection ended mid-call")
        self.applied[op] += 1
        self.keys[ctx.idempotency_key] = op
        if fault is Fault.LOST:
            raise RetryLater("the service answered 503 after applying it")
        if fault is Fault.HANG_AFTER:
            await anyio.sleep_forever()
        if fault is Fault.CUT:
            raise OutcomeUnknown("the connection ended mid-call")
        if fault is Fault.SLOW:
            await anyio.sleep(SLOW_SECONDS)
        return f"applied {op}"

    def status(self, ctx: CallContext) -> ToolResult:
        """The service's own answer to "did this call's key apply anything?"."""
        done = ctx.idempotency_key in self.keys
        return ToolResult(
            call_id=ctx.call_id,
            tool=ctx.tool,
            status=CallStatus.SUCCEEDED if done else CallStatus.FAILED,
            data={"applied": done},
        )


def add_service_tools(
    keeper: Keeper, service: Service, *, timeout: float, idempotent_writes: bool = False
) -> None:
    """Add the service's tools to `keeper`: `svc.lookup` (read), `svc.charge` (a write, not
    idempotent unless `idempotent_writes` claims so), `svc.delete` (destructive), and
    `admin.purge` (a write only an administrator may make)."""

    @keeper.tool(name="svc.lookup", effect="read_only", permissions=["svc:read"], timeout=timeout)
    async def lookup(key: str, ctx: CallContext) -> str:
        """Look a key up. Changes nothing."""
        return await service.serve(operation("svc.lookup", {"key": key}), ctx)

    @keeper.tool(
        name="svc.charge",
        effect="write",
        idempotent=idempotent_writes,
        permissions=["svc:write"],
        timeout=timeout,
        reconcile=service.status,
    )
    async def charge(op: str, amount: Any, ctx: CallContext) -> str:
        """Charge an amount (applied once per call: not idempotent)."""
        return await service.serve(operation("svc.charge", {"op": op, "amount": amount}), ctx)

    @keeper.tool(
        name="svc.delete",
        effect="destructive",
        permissions=["svc:write"],
        timeout=timeout,
        reconcile=service.status,
    )
    async def delete(op: str, count: Any, ctx: CallContext) -> str:
        """Delete `count` records. Cannot be undone: needs a person's approval."""
        return await service.serve(operation("svc.delete", {"op": op, "count": count}), ctx)

    @keeper.tool(name="admin.purge", effect="write", permissions=["admin:purge"], timeout=timeout)
    async def purge(op: str, ctx: CallContext) -> str:
        """Purge everything (an administrator's tool)."""
        return await service.serve(operation("admin.purge", {"op": op}), ctx)


@dataclass(frozen=True, kw_only=True, slots=True)
class FileService:
    """The service of the process-kill scenario: its effects are lines in a file, so they
    outlive the process that applied them."""

    path: Path
    """One line per effect: the idempotency key, then the operation."""

    def applied(self, op: str) -> int:
        """How many times `op` was applied."""
        if not self.path.exists():
            return 0
        return sum(line.partition(" ")[2] == op for line in self.path.read_text().splitlines())

    def status(self, ctx: CallContext) -> ToolResult:
        """Whether this call's key applied anything."""
        text = self.path.read_text() if self.path.exists() else ""
        done = any(line.partition(" ")[0] == ctx.idempotency_key for line in text.splitlines())
        return ToolResult(
            call_id=ctx.call_id,
            tool=ctx.tool,
            status=CallStatus.SUCCEEDED if done else CallStatus.FAILED,
            data={"applied": done},
        )


def add_file_tools(keeper: Keeper, service: FileService, *, die: bool) -> None:
    """Add `svc.transfer`, a write applied to `service`'s file; with `die`, the process kills
    itself (SIGKILL) once it is applied, before anything is recorded."""

    @keeper.tool(
        name="svc.transfer", effect="write", permissions=["svc:write"], reconcile=service.status
    )
    def transfer(op: str, ctx: CallContext) -> str:
        """Transfer money (applied once per call: not idempotent)."""
        with service.path.open("a") as f:
            f.write(f"{ctx.idempotency_key} {op}\n")
            f.flush()
            os.fsync(f.fileno())
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"applied {op}"
