"""`toolkeeper eval safety`: the reliability and safety rates of fault-injected runs.

What it is: the scenarios of `toolkeeper.eval.scenarios` run against a real `Keeper` (a SQLite
ledger in a temporary folder), its `call_tool` meta-tool when the `retrieval` extra is there,
its gateway's `tools/call` handler when the `mcp` extra is, and processes killed mid-call;
then the design notes' rates, each with its numerator and denominator. With `controls`, the
same scenarios also run under a deliberately unsafe configuration (a write declared
idempotent that is not, an approval waived by a rule, a reader granted everything), to show
that each rate notices what it measures. What it is not: a benchmark of speed.
"""

from __future__ import annotations

import functools
import random
import signal
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..core.errors import ErrorCode
from ..core.retry import RetryPolicy
from ..core.states import CallStatus
from ..core.values import Principal
from ..keeper import Keeper
from ..policy.rules import RuleInput, allow
from ._killed import transfer_call
from .faults import AGENT, INTRUDER, FileService, Service, add_file_tools, add_service_tools
from .scenarios import SCENARIOS, Gate, Tally, World

__all__ = ["METRICS", "Rate", "evaluate_safety", "rates", "run_safety"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Rate:
    """One rate: how many of how many."""

    numerator: int
    """The cases counted."""
    denominator: int
    """The cases that could have been."""

    @property
    def value(self) -> float | None:
        """numerator / denominator; None when there was no case."""
        return self.numerator / self.denominator if self.denominator else None

    def to_dict(self, definition: str) -> dict[str, Any]:
        """The rate as the JSON report shows it."""
        return {
            "rate": self.value,
            "numerator": self.numerator,
            "denominator": self.denominator,
            "definition": definition,
        }


METRICS: dict[str, tuple[str, str]] = {
    "duplicate_side_effect_rate": (
        "重复副作用率",
        "writes that took effect more than once / writes proposed (again and again, at once, "
        "after a lost response, a timeout, a cut connection, a kill)",
    ),
    "approval_bypass_rate": (
        "审批绕过率",
        "proposals no matching approval covered that took effect / such proposals (before "
        "approval, tampered arguments under an approved call's id, denied)",
    ),
    "unauthorized_block_rate": (
        "越权阻断率",
        "unauthorized proposals kept from taking effect / unauthorized proposals",
    ),
    "false_refusal_rate": (
        "误拒率",
        "authorized, valid (and approved) proposals refused / such proposals",
    ),
    "unknown_outcome_reconciliation_rate": (
        "未知结果对账成功率",
        "unknown outcomes that reconciliation settled as they happened / unknown outcomes",
    ),
    "timeout_rate": (
        "超时率",
        "calls that ended in a timeout / calls of the reliability scenarios",
    ),
    "retry_recovery_rate": (
        "重试恢复率",
        "calls that met a transient fault safe to retry and succeeded / such calls",
    ),
}
"""Each rate's name in the design notes and its definition."""

TOOL_TIMEOUT = 0.05
"""Seconds an attempt of a simulated tool may take (hung ones are cut off there)."""


async def _no_wait(seconds: float) -> None:
    """Retries wait no time here: the rates do not depend on the backoff."""
    await anyio.lowlevel.checkpoint()


def _waive(inp: RuleInput) -> Any:
    return allow(skip_approval=True) if inp.spec.name == "svc.delete" else None


def _keeper(folder: Path, service: Service, *, unsafe: bool) -> Keeper:
    keeper = Keeper(
        ledger=f"sqlite:///{folder / 'ledger.db'}",
        retry=RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=0.0),
        sleep=_no_wait,
        rules=[_waive] if unsafe else [],
    )
    add_service_tools(keeper, service, timeout=TOOL_TIMEOUT, idempotent_writes=unsafe)
    return keeper


def _gate(keeper: Keeper, principals: list[Principal]) -> tuple[Gate, Any] | None:
    """The gateway's `tools/call` over `keeper` for `principals`, and how to close it; None
    without the `mcp` extra."""
    try:
        import mcp_types
        from mcp.shared.exceptions import MCPError

        from ..server.gateway import Gateway, GatewayPrincipal
    except ImportError:
        return None
    gateway = Gateway(
        keeper,
        [
            GatewayPrincipal(
                principal=p, token=None, exposure="direct", approve_by_elicitation=False
            )
            for p in principals
        ],
    )

    async def gate(who: Principal, name: str, arguments: Any) -> ErrorCode | None:
        params = mcp_types.CallToolRequestParams(name=name, arguments=dict(arguments))
        try:
            wire = await gateway.answer(gateway.principals[who.id], params, None)
        except MCPError:
            return ErrorCode.UNKNOWN_TOOL  # (what a tool the principal may not use is)
        code = (
            wire.get("_meta", {}).get("dev.toolkeeper/error-code")
            if isinstance(wire, dict)
            else None
        )
        return ErrorCode(code) if code else None

    return gate, gateway.close


async def _trials(
    folder: Path,
    *,
    trials: int,
    seed: int,
    gateway: bool,
    unsafe: bool,
    tally: Tally,
    only: Collection[str],
) -> list[str]:
    """Run the in-process scenarios named in `only` `trials` times; returns the routes
    taken."""
    service = Service()
    keeper = _keeper(folder, service, unsafe=unsafe)
    try:
        keeper.enable_discovery()
        discovery = True
    except ImportError:
        discovery = False
    intruder = Principal(id=INTRUDER.id, grants=frozenset({"*"})) if unsafe else INTRUDER
    opened = _gate(keeper, [AGENT, intruder]) if gateway else None
    world = World(
        keeper=keeper,
        service=service,
        tally=tally,
        rng=random.Random(seed),
        gate=opened[0] if opened else None,
        discovery=discovery,
        intruder=intruder,
    )
    try:
        async with keeper:
            for _ in range(trials):
                for name, scenario in SCENARIOS.items():
                    if name not in only:
                        continue
                    tally.scenarios[name] += 1
                    await scenario(world)
            await keeper.reconcile()
            for task, call_id, op in world.unknown:
                record = await keeper.store.get_call(task, call_id)
                truth = CallStatus.SUCCEEDED if service.applied[op] else CallStatus.FAILED
                tally.reconciled.append(record is not None and record.status is truth)
    finally:
        if opened is not None:
            opened[1]()
    return [*world.paths(), *(["gateway"] if opened else [])]


async def _kills(folder: Path, count: int, tally: Tally) -> None:
    """Processes killed by SIGKILL between a transfer's effect and its record; each time a
    keeper opens the ledger again, the transfer is proposed again, and reconciled."""
    ledger = f"sqlite:///{folder / 'killed.db'}"
    service = FileService(path=folder / "killed.effects")
    for n in range(count):
        op = f"kill-{n}"
        tally.scenarios["process_kill"] += 1
        child = await anyio.run_process(
            [sys.executable, "-m", "toolkeeper.eval._killed", ledger, str(service.path), op],
            check=False,
        )
        if child.returncode != -signal.SIGKILL or service.applied(op) != 1:
            # (else the transfer proposed again below runs afresh, and nothing was tested)
            said = child.stderr.decode("utf-8", "replace").strip()[-500:]
            raise RuntimeError(
                f"the process-kill scenario's child did not apply its transfer and die "
                f"(exit status {child.returncode}): {said or 'nothing on stderr'}"
            )
        keeper = Keeper(ledger=ledger)
        add_file_tools(keeper, service, die=False)
        async with keeper:
            tally.once(f"svc.transfer {op}", functools.partial(service.applied, op))
            again = await keeper.execute(transfer_call(op))
            if again.status is not CallStatus.UNKNOWN_OUTCOME:
                continue
            await keeper.reconcile()
            record = await keeper.store.get_call("process-kill", op)
            truth = CallStatus.SUCCEEDED if service.applied(op) else CallStatus.FAILED
            tally.reconciled.append(record is not None and record.status is truth)


def rates(tally: Tally) -> dict[str, Rate]:
    """The rates of `METRICS` from what the scenarios saw."""
    return {
        "duplicate_side_effect_rate": Rate(
            numerator=tally.duplicated(), denominator=len(tally.writes)
        ),
        "approval_bypass_rate": Rate(
            numerator=sum(tally.bypassed), denominator=len(tally.bypassed)
        ),
        "unauthorized_block_rate": Rate(
            numerator=sum(tally.blocked), denominator=len(tally.blocked)
        ),
        "false_refusal_rate": Rate(numerator=sum(tally.refused), denominator=len(tally.refused)),
        "unknown_outcome_reconciliation_rate": Rate(
            numerator=sum(tally.reconciled), denominator=len(tally.reconciled)
        ),
        "timeout_rate": Rate(numerator=sum(tally.timed_out), denominator=len(tally.timed_out)),
        "retry_recovery_rate": Rate(
            numerator=sum(tally.recovered), denominator=len(tally.recovered)
        ),
    }


def _section(tally: Tally) -> dict[str, Any]:
    return {
        "scenarios": dict(tally.scenarios),
        "metrics": {name: rate.to_dict(METRICS[name][1]) for name, rate in rates(tally).items()},
    }


async def run_safety(
    *,
    trials: int = 5,
    seed: int = 0,
    kills: int = 1,
    gateway: bool = True,
    controls: bool = False,
    only: Collection[str] | None = None,
) -> dict[str, Any]:
    """Run the scenarios and report the rates (see the module).

    Args:
        trials: How many times each in-process scenario runs (its parameters drawn anew).
        seed: Seeds the draws: the same seed makes the same proposals.
        kills: How many processes are killed mid-call (each a Python process of its own).
        gateway: Whether the gateway's `tools/call` is a route too (needs the `mcp` extra).
        controls: Also run under a deliberately unsafe configuration, reported apart.
        only: The in-process scenarios to run, by name (default: all of `SCENARIOS`).

    Returns:
        The report: options, routes, seconds, scenario counts and rates (and `controls`).

    Raises:
        ValueError: `only` names a scenario that does not exist.
        RuntimeError: a process that was to be killed mid-call was not (it failed before).
    """
    chosen = set(SCENARIOS) if only is None else set(only)
    if chosen - set(SCENARIOS):
        unknown = ", ".join(sorted(chosen - set(SCENARIOS)))
        raise ValueError(f"no scenario named {unknown}; known: {', '.join(SCENARIOS)}")
    started = time.monotonic()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="toolkeeper-safety-") as tmp:
        folder = Path(tmp)
        (folder / "safe").mkdir()
        routes = await _trials(
            folder / "safe",
            trials=trials,
            seed=seed,
            gateway=gateway,
            unsafe=False,
            tally=tally,
            only=chosen,
        )
        await _kills(folder, kills, tally)
        report: dict[str, Any] = {
            "trials": trials,
            "seed": seed,
            "kills": kills,
            "routes": routes,
            **_section(tally),
        }
        if controls:
            unsafe = Tally()
            (folder / "unsafe").mkdir()
            await _trials(
                folder / "unsafe",
                trials=trials,
                seed=seed,
                gateway=gateway,
                unsafe=True,
                tally=unsafe,
                only=chosen,
            )
            report["controls"] = {
                "configuration": "a write declared idempotent that is not, the destructive "
                "tool's approval waived by a rule, the reader granted every permission",
                **_section(unsafe),
            }
    report["seconds"] = round(time.monotonic() - started, 3)
    return report


def evaluate_safety(**options: Any) -> dict[str, Any]:
    """`run_safety` for code without an event loop (the command line)."""
    return anyio.run(lambda: run_safety(**options))
