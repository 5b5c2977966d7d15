"""The report of the executor benchmark: cases, ratios to the peers, and the issue's targets."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .stats import Summary

__all__ = ["CaseReport", "ExecutorBench", "Target"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseReport:
    """How one case fared."""

    key: str
    """Identifier (`toolkeeper.memory`, `pydantic_ai`, ...)."""
    label: str
    """What a person reads."""
    status: str
    """`ok`, `not installed` or `error`."""
    version: str | None = None
    """Version of the package under test."""
    note: str | None = None
    """Why it was not measured, or what it measured with (ledger file, audit sink)."""
    summary: Summary | None = None
    """Per-call times, when measured."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {"label": self.label, "status": self.status, "version": self.version}
        if self.note is not None:
            out["note"] = self.note
        if self.summary is not None:
            out |= self.summary.to_dict()
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """One of the issue's performance targets, checked against this run."""

    key: str
    """Identifier in the JSON report."""
    description: str
    """The target in words."""
    measured: float | None
    """What it is about, in `unit`: a toolkeeper median, or its paired ratio to a peer."""
    limit: float | None
    """The bound it must not exceed (None when a needed case was not measured)."""
    unit: str
    """"us" (microseconds per call) or "x" (a ratio)."""
    met: bool | None
    """Whether it was met; None when it could not be checked."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "description": self.description,
            "measured": _round(self.measured, 3 if self.unit == "x" else 2),
            "limit": self.limit,
            "unit": self.unit,
            "met": self.met,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorBench:
    """The report of one run of the executor benchmark."""

    calls: int
    """Timed calls per case and repeat."""
    repeats: int
    """Interleaved repeats of every case."""
    warmup: int
    """Untimed calls per case before the first repeat."""
    cases: tuple[CaseReport, ...]
    """Toolkeeper's cases, then the peers'."""
    targets: tuple[Target, ...]
    """The issue's targets, checked."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Python, platform, CPUs and load average: the context the figures need."""

    def case(self, key: str) -> CaseReport | None:
        """The case with this key, if it exists."""
        return next((c for c in self.cases if c.key == key), None)

    @property
    def ratios(self) -> dict[str, dict[str, float]]:
        """Median of each toolkeeper case divided by the median of each measured peer."""
        return self._ratios(lambda s: s.median_us)

    @property
    def cpu_ratios(self) -> dict[str, dict[str, float]]:
        """The same ratios of CPU time per call (steadier on a busy machine)."""
        return self._ratios(lambda s: s.cpu_us)

    @property
    def paired_ratios(self) -> dict[str, dict[str, float]]:
        """Per toolkeeper case and peer: the median over the repeats of the ratio of their two
        medians in the same repeat. Blocks of one repeat run within a fraction of a second
        of each other, so on a host whose speed drifts (by 2x, on shared machines) this
        compares the two at the same speed, where the ratio of the overall medians may set
        one's fast repeats against the other's slow ones."""

        peers = [c for c in self.cases if not c.key.startswith("toolkeeper.") and c.summary]
        out: dict[str, dict[str, float]] = {}
        for case in self.cases:
            if case.key.startswith("toolkeeper.") and case.summary is not None:
                out[case.key] = {
                    p.key: round(r, 3)
                    for p in peers
                    if p.summary and (r := paired_ratio(case.summary, p.summary)) is not None
                }
        return out

    def _ratios(self, figure: Callable[[Summary], float | None]) -> dict[str, dict[str, float]]:
        def value(case: CaseReport) -> float | None:
            return figure(case.summary) if case.summary is not None else None

        peers = [c for c in self.cases if not c.key.startswith("toolkeeper.")]
        out: dict[str, dict[str, float]] = {}
        for case in self.cases:
            own = value(case)
            if case.key.startswith("toolkeeper.") and own is not None:
                out[case.key] = {
                    p.key: round(own / other, 3)
                    for p in peers
                    if (other := value(p)) is not None and other > 0
                }
        return out

    @property
    def all_calls_succeeded(self) -> bool:
        """Whether every timed toolkeeper call returned the right result."""
        own = [c for c in self.cases if c.key.startswith("toolkeeper.")]
        return all(c.summary is not None and c.summary.failures == 0 for c in own)

    @property
    def targets_met(self) -> bool:
        """Whether every target was checked and met."""
        return all(t.met is True for t in self.targets)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report of `toolkeeper bench executor --json`."""
        return {
            "bench": "executor",
            "unit": "microseconds per call",
            "calls": self.calls,
            "repeats": self.repeats,
            "warmup": self.warmup,
            "median": "median of the per-repeat medians; p99 over all timed calls",
            "cpu": "process CPU time per call, median over the repeats (no I/O waits)",
            "tool": "async def add(a: int, b: int) -> int; JSON-string arguments; new call id",
            "environment": self.environment,
            "cases": {c.key: c.to_dict() for c in self.cases},
            "ratios": self.ratios,
            "paired_ratios": self.paired_ratios,
            "paired": "median over the repeats of one repeat's toolkeeper median / peer median",
            "cpu_ratios": self.cpu_ratios,
            "targets": {t.key: t.to_dict() for t in self.targets},
            "targets_met": self.targets_met,
            "all_calls_succeeded": self.all_calls_succeeded,
        }


def paired_ratio(own: Summary, other: Summary) -> float | None:
    """The median over the repeats of the ratio of `own`'s median to `other`'s in the same
    repeat (see `ExecutorBench.paired_ratios`); None when no repeat has both."""
    pairs = [
        a / b for a, b in zip(own.repeat_medians_us, other.repeat_medians_us, strict=False) if b > 0
    ]
    return statistics.median(pairs) if pairs else None


def _round(value: float | None, digits: int = 2) -> float | None:
    return round(value, digits) if value is not None else None
