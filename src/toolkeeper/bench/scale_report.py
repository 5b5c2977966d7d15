"""The figures of `toolkeeper bench scale` (`toolkeeper.bench.scale`): one row per
configuration of gateway processes and clients, the budget phase, and the machine; as JSON
and as text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._console import render_table

__all__ = ["BudgetRun", "ScaleBench", "ScaleRun", "render_scale"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleRun:
    """One configuration: `clients` clients over `processes` gateway processes."""

    processes: int
    """Gateway processes, all on the one ledger."""
    clients: int
    """Concurrent MCP clients, spread round-robin over the processes."""
    calls: int
    """Calls made, all clients together."""
    seconds: float
    """Wall time from the first call to the last answer."""
    calls_per_second: float
    """Calls answered per second of `seconds`."""
    p50_ms: float
    """Median latency of one call, as its client saw it."""
    p99_ms: float
    """99th percentile latency."""
    failures: int
    """Calls that raised, or were answered with an error."""
    duplicates: int
    """Effects written more than once for one call (must be 0)."""
    lost: int
    """Calls answered without a terminal ledger record, plus records of calls never answered
    (must be 0)."""
    errors: dict[str, int]
    """The failures by error code (`RATE_LIMITED`, ...; `RAISED` for a call that raised)."""
    client_cpu: float
    """CPU seconds of the load process per wall second: near 1.0, the load is the bottleneck."""
    gateway_cpu: float
    """CPU seconds of all gateway processes together per wall second (Linux; 0 elsewhere)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, figures rounded."""
        return {
            "processes": self.processes,
            "clients": self.clients,
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "calls_per_second": round(self.calls_per_second, 1),
            "p50_ms": round(self.p50_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "failures": self.failures,
            "duplicates": self.duplicates,
            "lost": self.lost,
            "errors": dict(self.errors),
            "client_cpu": round(self.client_cpu, 2),
            "gateway_cpu": round(self.gateway_cpu, 2),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetRun:
    """The budget phase: calls of one task, spread over every process, under
    `max_calls_per_task`."""

    processes: int
    """Gateway processes."""
    clients: int
    """Concurrent clients."""
    calls: int
    """Calls proposed, all in one task."""
    budget: int
    """`max_calls_per_task`."""
    ran: int
    """Calls whose tool ran (lines in the effects file)."""
    refused: int
    """Calls answered `BUDGET_EXCEEDED`."""
    failures: int
    """Calls that raised, or were answered with another error."""
    duplicates: int
    """Effects written more than once for one call (must be 0)."""
    lost: int
    """As `ScaleRun.lost` (must be 0)."""

    @property
    def overrun(self) -> int:
        """How many more than the budget ran (must be 0)."""
        return max(0, self.ran - self.budget)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "processes": self.processes,
            "clients": self.clients,
            "calls": self.calls,
            "budget": self.budget,
            "ran": self.ran,
            "overrun": self.overrun,
            "refused": self.refused,
            "failures": self.failures,
            "duplicates": self.duplicates,
            "lost": self.lost,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleBench:
    """The figures of one run of `toolkeeper bench scale`."""

    runs: tuple[ScaleRun, ...]
    """One per (processes, clients) configuration, in the order run."""
    budget: BudgetRun | None
    """The budget phase, or None when it was not run."""
    environment: dict[str, Any] = field(default_factory=dict)
    """CPUs, load average before and after, Python, platform, servers."""

    @property
    def held(self) -> bool:
        """Whether every promise held: no failure, duplicate, lost record or overrun."""
        runs_ok = all(r.failures == r.duplicates == r.lost == 0 for r in self.runs)
        b = self.budget
        budget_ok = b is None or (b.failures == b.duplicates == b.lost == b.overrun == 0)
        return runs_ok and budget_ok

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: runs, the budget phase and the environment."""
        return {
            "runs": [r.to_dict() for r in self.runs],
            "budget": None if self.budget is None else self.budget.to_dict(),
            "held": self.held,
            "environment": self.environment,
        }


def render_scale(report: ScaleBench) -> str:
    """The report as text: one row per configuration, the budget phase, the machine."""
    env = report.environment
    rows = [
        [
            r.processes,
            r.clients,
            r.calls,
            f"{r.calls_per_second:,.0f}",
            f"{r.p50_ms:.1f}",
            f"{r.p99_ms:.1f}",
            r.failures,
            r.duplicates,
            r.lost,
            f"{r.client_cpu:.2f}",
            f"{r.gateway_cpu:.2f}",
        ]
        for r in report.runs
    ]
    headers = ["processes", "clients", "calls", "calls/s", "p50 ms", "p99 ms"]
    headers += ["failures", "duplicates", "lost", "client cpu", "gateway cpu"]
    lines = [
        "toolkeeper bench scale: gateway processes on one PostgreSQL ledger, Redis limits",
        f"{env.get('cpus')} CPUs, load average {env.get('load_average')} -> "
        f"{env.get('load_average_after')}; Python {env.get('python')}, "
        f"PostgreSQL {env.get('postgresql')}, {env.get('ledger_pool_size')} connections a process",
        "",
        render_table(headers, rows),
        "",
        "client cpu, gateway cpu = CPU seconds per wall second of the one load process, and of",
        "the gateway processes together (the rest of the CPUs: PostgreSQL, Redis, other work)",
    ]
    for r in report.runs:
        if r.errors:
            shown = ", ".join(f"{code} {n}" for code, n in sorted(r.errors.items()))
            lines.append(f"  {r.processes} processes, {r.clients} clients failed: {shown}")
    b = report.budget
    if b is not None:
        lines += [
            "",
            f"budget: max_calls_per_task = {b.budget}, {b.calls} calls of one task by "
            f"{b.clients} clients over {b.processes} processes: ran {b.ran}, overrun "
            f"{b.overrun}, refused {b.refused}, failures {b.failures}, duplicates "
            f"{b.duplicates}, lost {b.lost}",
        ]
    lines += ["", "every promise held" if report.held else "NOT every promise held"]
    return "\n".join(lines)
