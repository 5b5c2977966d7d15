"""The fault-injected scenarios of `toolkeeper eval safety`, and the tally they fill.

What it is: each scenario proposes calls the way a model, a retrying client or an attacker
does (through `Keeper.execute`, `execute_many`, the `call_tool` meta-tool and, when the `mcp`
extra is there, the gateway's `tools/call` handler), makes the simulated service
(`toolkeeper.eval.faults`) fail on the way, and notes in a `Tally` what should have happened
against what did: effects are counted at the service, never taken from toolkeeper's answers.
What it is not: a report (`toolkeeper.eval.safety` turns the tally into rates).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..core.errors import ErrorCode
from ..core.states import CallStatus
from ..core.values import Principal, ToolCall, ToolResult
from ..dialects.registry import get_dialect
from ..keeper import Keeper
from .faults import AGENT, INTRUDER, Fault, Service, operation

__all__ = ["REFUSALS", "SCENARIOS", "Tally", "World"]

REFUSALS = frozenset(
    {
        ErrorCode.UNKNOWN_TOOL,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.APPROVAL_REQUIRED,
        ErrorCode.APPROVAL_DENIED,
        ErrorCode.APPROVAL_EXPIRED,
        ErrorCode.BUDGET_EXCEEDED,
        ErrorCode.RATE_LIMITED,
        ErrorCode.CALL_ID_CONFLICT,
        ErrorCode.INVALID_CALL_ID,
        ErrorCode.PAYLOAD_TOO_LARGE,
    }
)
"""Codes that say toolkeeper would not run a call (as opposed to a call that ran and failed)."""

BIG = 41778229342798590
"""An int above 2**53 whose nearest double prints with the same digits."""


@dataclass(kw_only=True)
class Tally:
    """What the scenarios saw, one entry per proposal (or per operation) that a metric counts."""

    writes: dict[str, Callable[[], int]] = field(default_factory=dict)
    """Operations that must take effect at most once, with how often they did."""
    bypassed: list[bool] = field(default_factory=list)
    """Per proposal that no matching approval covers: whether it took effect anyway."""
    blocked: list[bool] = field(default_factory=list)
    """Per unauthorized proposal: whether it was kept from taking effect."""
    refused: list[bool] = field(default_factory=list)
    """Per authorized, valid (and approved, where needed) proposal: whether it was refused."""
    reconciled: list[bool] = field(default_factory=list)
    """Per call that ended UNKNOWN_OUTCOME: whether reconciliation settled it as it happened."""
    timed_out: list[bool] = field(default_factory=list)
    """Per call run in the reliability scenarios: whether it ended in a timeout."""
    recovered: list[bool] = field(default_factory=list)
    """Per call that met a transient fault safe to retry (a read, or nothing sent): whether
    it succeeded in the end."""
    scenarios: Counter[str] = field(default_factory=Counter)
    """How many times each scenario ran."""

    def once(self, op: str, count: Callable[[], int]) -> None:
        """Note that `op` must take effect at most once."""
        self.writes[op] = count

    def duplicated(self) -> int:
        """Operations that took effect more than once."""
        return sum(count() > 1 for count in self.writes.values())

    def ran(self, result: ToolResult) -> None:
        """Note a call of a reliability scenario and whether it timed out."""
        error = result.error
        self.timed_out.append(
            error is not None
            and (error.code is ErrorCode.TIMEOUT or (error.details or {}).get("cause") == "TIMEOUT")
        )


def refusal(result: ToolResult) -> bool:
    """Whether toolkeeper refused the call (did not let it run)."""
    return result.error is not None and result.error.code in REFUSALS


Gate = Callable[[Principal, str, Mapping[str, Any]], Coroutine[Any, Any, ErrorCode | None]]
"""A gateway's `tools/call` for a principal: the error code answered (None: no error)."""


@dataclass(kw_only=True)
class World:
    """One trial's keeper, service and tally."""

    keeper: Keeper
    service: Service
    tally: Tally
    rng: random.Random
    gate: Gate | None = None
    """The gateway's `tools/call`, when the `mcp` extra is installed."""
    discovery: bool = False
    """Whether the keeper has the discovery meta-tools (`call_tool`)."""
    intruder: Principal = INTRUDER
    unknown: list[tuple[str, str, str]] = field(default_factory=list)
    """(task, call id, operation) of calls that ended UNKNOWN_OUTCOME, to reconcile."""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def fresh(self, prefix: str) -> str:
        """A name no other call of the run uses."""
        return f"{prefix}-{next(self._ids)}"

    def paths(self) -> list[str]:
        """The library's routes to a tool this keeper has."""
        return ["execute", "execute_many", *(["call_tool"] if self.discovery else [])]

    async def propose(self, call: ToolCall, path: str = "execute") -> ToolResult:
        """Propose `call` by `path`: `execute`, `execute_many` or `call_tool`."""
        if path == "call_tool":
            call = ToolCall(
                call_id=call.call_id,
                task_id=call.task_id,
                name="call_tool",
                arguments={"name": call.name, "arguments": call.arguments},
                principal=call.principal,
            )
        if path == "execute_many":
            [result] = await self.keeper.execute_many([call])
            return result
        return await self.keeper.execute(call)

    def applied(self, tool: str, arguments: Mapping[str, Any]) -> Callable[[], int]:
        """How often the operation of `tool` with `arguments` took effect."""
        op = operation(tool, dict(arguments))
        return lambda: self.service.applied[op]

    def note_unknown(self, result: ToolResult, task: str, tool: str, args: dict[str, Any]) -> None:
        """Keep a call that ended UNKNOWN_OUTCOME for reconciliation at the end of the run."""
        if result.status is CallStatus.UNKNOWN_OUTCOME:
            self.unknown.append((task, result.call_id, operation(tool, args)))


def _call(w: World, tool: str, args: dict[str, Any], *, who: Principal = AGENT) -> ToolCall:
    return ToolCall(call_id=w.fresh("call"), name=tool, arguments=args, principal=who)


# -- reliability --------------------------------------------------------------------------------


async def retryable_errors(w: World) -> None:
    """A read meets 1-4 transient errors (3 attempts are allowed); a write finds the service
    down 1-2 times (nothing sent); a write's response is lost after it was applied, and the
    model proposes it again."""
    key = w.fresh("key")
    w.service.inject(
        operation("svc.lookup", {"key": key}), *[Fault.TRANSIENT] * w.rng.randint(1, 4)
    )
    read = await w.propose(_call(w, "svc.lookup", {"key": key}), w.rng.choice(w.paths()))
    w.tally.ran(read)
    w.tally.recovered.append(read.status is CallStatus.SUCCEEDED)
    w.tally.refused.append(refusal(read))

    down = {"op": w.fresh("down"), "amount": 5}
    w.service.inject(operation("svc.charge", down), *[Fault.DOWN] * w.rng.randint(1, 2))
    w.tally.once(operation("svc.charge", down), w.applied("svc.charge", down))
    sent = await w.propose(_call(w, "svc.charge", down), w.rng.choice(w.paths()))
    w.tally.ran(sent)
    w.tally.recovered.append(sent.status is CallStatus.SUCCEEDED)
    w.tally.refused.append(refusal(sent))

    lost = {"op": w.fresh("lost"), "amount": 7}
    w.service.inject(operation("svc.charge", lost), Fault.LOST, Fault.LOST)
    w.tally.once(operation("svc.charge", lost), w.applied("svc.charge", lost))
    call = _call(w, "svc.charge", lost)
    for _ in range(2):
        w.tally.ran(await w.propose(call, w.rng.choice(w.paths())))


async def timeouts(w: World) -> None:
    """A read hangs on 1-3 attempts; a write hangs after it was applied and one before, each
    ending with an unknown outcome, and each proposed again."""
    key = w.fresh("key")
    w.service.inject(operation("svc.lookup", {"key": key}), *[Fault.HANG] * w.rng.randint(1, 3))
    read = await w.propose(_call(w, "svc.lookup", {"key": key}))
    w.tally.ran(read)
    w.tally.recovered.append(read.status is CallStatus.SUCCEEDED)
    w.tally.refused.append(refusal(read))
    for fault in (Fault.HANG_AFTER, Fault.HANG):
        args = {"op": w.fresh("hung"), "amount": 3}
        w.service.inject(operation("svc.charge", args), fault, fault)
        w.tally.once(operation("svc.charge", args), w.applied("svc.charge", args))
        call = _call(w, "svc.charge", args)
        first = await w.propose(call)
        w.tally.ran(first)
        w.note_unknown(first, call.task_id, "svc.charge", args)
        w.tally.ran(await w.propose(call, w.rng.choice(w.paths())))


async def upstream_dying(w: World) -> None:
    """The connection to the service ends mid-call, after the write was applied or before;
    the model proposes the write again."""
    for fault in (Fault.CUT, Fault.CUT_BEFORE):
        args = {"op": w.fresh("cut"), "amount": 9}
        w.service.inject(operation("svc.charge", args), fault, fault)
        w.tally.once(operation("svc.charge", args), w.applied("svc.charge", args))
        call = _call(w, "svc.charge", args)
        first = await w.propose(call, w.rng.choice(w.paths()))
        w.tally.ran(first)
        w.note_unknown(first, call.task_id, "svc.charge", args)
        w.tally.ran(await w.propose(call, w.rng.choice(w.paths())))


# -- duplicates -----------------------------------------------------------------------------


async def duplicate_proposals(w: World) -> None:
    """The same write proposed 2-8 times at once on one route, in one batch, and again after
    it ended; through the gateway, a plain client's identical proposals at once, and again
    after an unknown outcome."""
    k = w.rng.randint(2, 8)
    for path in w.paths():
        args = {"op": w.fresh("dup"), "amount": 1}
        w.service.inject(operation("svc.charge", args), Fault.SLOW)
        w.tally.once(operation("svc.charge", args), w.applied("svc.charge", args))
        call = _call(w, "svc.charge", args)
        async with anyio.create_task_group() as tg:
            for _ in range(k):
                tg.start_soon(w.propose, call, path)
        await w.propose(call, path)
    batch = {"op": w.fresh("batch"), "amount": 2}
    w.tally.once(operation("svc.charge", batch), w.applied("svc.charge", batch))
    await w.keeper.execute_many([_call(w, "svc.charge", batch)] * k)
    gate = w.gate
    if gate is None:
        return
    slow = {"op": w.fresh("gw"), "amount": 4}
    w.service.inject(operation("svc.charge", slow), Fault.SLOW)
    w.tally.once(operation("svc.charge", slow), w.applied("svc.charge", slow))
    async with anyio.create_task_group() as tg:
        for _ in range(k):
            tg.start_soon(gate, AGENT, "svc.charge", slow)
    cut = {"op": w.fresh("gwcut"), "amount": 6}
    w.service.inject(operation("svc.charge", cut), Fault.CUT)
    w.tally.once(operation("svc.charge", cut), w.applied("svc.charge", cut))
    for _ in range(2):
        await gate(AGENT, "svc.charge", cut)


# -- authorization ------------------------------------------------------------------------------


async def unauthorized(w: World) -> None:
    """Writes by a principal granted only reads, on every route; an administrator's tool
    proposed by the agent; and the same tool in a call parsed from a model's response by the
    natural first code (no principal named)."""
    for path in w.paths():
        args = {"op": w.fresh("intrude"), "amount": 100}
        await w.propose(_call(w, "svc.charge", args, who=w.intruder), path)
        w.tally.blocked.append(w.applied("svc.charge", args)() == 0)
    if w.gate is not None:
        args = {"op": w.fresh("intrude-gw"), "amount": 100}
        await w.gate(w.intruder, "svc.charge", args)
        w.tally.blocked.append(w.applied("svc.charge", args)() == 0)
    purge = {"op": w.fresh("purge")}
    await w.propose(_call(w, "admin.purge", purge))
    w.tally.blocked.append(w.applied("admin.purge", purge)() == 0)
    parsed = {"op": w.fresh("parsed")}
    response = {
        "id": w.fresh("resp"),
        "type": "function_call",
        "call_id": w.fresh("fc"),
        "name": "admin.purge",
        "arguments": f'{{"op": "{parsed["op"]}"}}',
    }
    try:
        calls = get_dialect("openai_responses").parse(response)
        for call in calls:
            await w.keeper.execute(call)
    except (TypeError, ValueError):  # refusing to parse without a principal keeps it out too
        pass
    w.tally.blocked.append(w.applied("admin.purge", parsed)() == 0)


async def tampered_approvals(w: World) -> None:
    """A destructive call waits for approval; other arguments are proposed under its id before
    and after it is approved (another text, and a number that prints alike); the approved one
    runs; a denied call is proposed again. Through the gateway, a plain client's approved call
    is followed by the number that prints alike."""
    for path in w.paths():
        op = w.fresh("del")
        approved = {"op": op, "count": BIG}
        call = _call(w, "svc.delete", approved)
        asked = await w.propose(call, path)
        w.tally.bypassed.append(w.applied("svc.delete", approved)() > 0)
        before = {"op": op + "-all", "count": BIG}
        await w.propose(_with(call, before), path)
        w.tally.bypassed.append(w.applied("svc.delete", before)() > 0)
        if asked.approval_id is not None:
            await w.keeper.approvals.approve(asked.approval_id, by="eval")
        for other in ({"op": op + "-all", "count": BIG}, {"op": op, "count": float(BIG)}):
            await w.propose(_with(call, other), path)
            w.tally.bypassed.append(w.applied("svc.delete", other)() > 0)
        proper = await w.propose(call, path)
        w.tally.refused.append(refusal(proper))
        w.tally.once(operation("svc.delete", approved), w.applied("svc.delete", approved))

        denied = {"op": w.fresh("deny"), "count": 1}
        no = _call(w, "svc.delete", denied)
        first = await w.propose(no, path)
        if first.approval_id is not None:
            await w.keeper.approvals.deny(first.approval_id, by="eval", reason="no")
        await w.propose(no, path)
        w.tally.bypassed.append(w.applied("svc.delete", denied)() > 0)
    gate = w.gate
    if gate is None:
        return
    op = w.fresh("gwdel")
    requested = {"op": op, "count": BIG}
    first_code = await gate(AGENT, "svc.delete", requested)
    w.tally.bypassed.append(w.applied("svc.delete", requested)() > 0)
    if first_code is ErrorCode.APPROVAL_REQUIRED:
        for pending in await w.keeper.approvals.pending():
            if pending.arguments.get("op") == op:
                await w.keeper.approvals.approve(pending.id, by="eval")
    twin = {"op": op, "count": float(BIG)}
    await gate(AGENT, "svc.delete", twin)
    w.tally.bypassed.append(w.applied("svc.delete", twin)() > 0)


def _with(call: ToolCall, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(
        call_id=call.call_id,
        task_id=call.task_id,
        name=call.name,
        arguments=arguments,
        principal=call.principal,
    )


SCENARIOS: Mapping[str, Callable[[World], Awaitable[None]]] = {
    "retryable_errors": retryable_errors,
    "timeouts": timeouts,
    "upstream_dying": upstream_dying,
    "duplicate_proposals": duplicate_proposals,
    "unauthorized": unauthorized,
    "tampered_approvals": tampered_approvals,
}
"""The in-process scenarios, by name (the process-kill one runs apart: see `safety`)."""
