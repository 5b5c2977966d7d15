"""Timing helpers the benchmarks share: per-call timing loops, interleaved repeats, summaries.

Machines that run these benchmarks are small and busy, so every benchmark here follows the same
recipe: time each call on its own, run each measured block several times with the blocks
interleaved (their order rotates from one repeat to the next, so a burst of outside load hits
every block alike, and runs backwards every other round of rotations, so no block always
follows the same one and inherits what it leaves: cold caches, a thread still busy), and report
the median of the per-repeat medians. The p99 is over all calls
of all repeats. While blocks run, the objects that existed before are frozen out of the garbage
collector (`gc.freeze`), so the modules one framework imported do not slow the collections that
run during another's calls; the collector runs before each block.

This module is pure standard library; it does not time anything by itself.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Summary",
    "Timing",
    "cpu_seconds",
    "interleave",
    "interleave_async",
    "percentile",
    "time_async_calls",
    "time_calls",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) with linear interpolation between closest ranks.

    Raises:
        ValueError: `values` is empty or `q` is outside 0-100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError("q must be within 0 and 100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds the processes `pids` have spent so far (Linux `/proc`; a
    process that is gone, or a platform without `/proc`, counts 0)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    """The per-call times of one measured block."""

    seconds: tuple[float, ...]
    """Wall-clock time of each call, in seconds."""
    failures: int = 0
    """Calls whose result the block's check rejected."""
    cpu_seconds: float | None = None
    """CPU time the whole process spent on the block (timing overhead included)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """Per-call times of one case over all its repeats, in microseconds."""

    calls: int
    """Calls timed, over all repeats."""
    median_us: float
    """Median of the per-repeat medians: the headline figure."""
    p99_us: float
    """99th percentile over every call of every repeat."""
    mean_us: float
    """Mean over every call (outliers included)."""
    min_us: float
    """Fastest call."""
    repeat_medians_us: tuple[float, ...]
    """The median of each repeat, in the order they ran: their spread shows the noise."""
    failures: int = 0
    """Calls whose result was wrong, over all repeats."""
    cpu_us: float | None = None
    """CPU time per call: median over the repeats of block CPU time / calls. Unlike wall-clock
    time it barely moves when other processes compete for the CPU (but excludes I/O waits)."""

    @classmethod
    def of(cls, timings: Sequence[Timing]) -> Summary:
        """Summarize the blocks of one case (one `Timing` per repeat).

        Raises:
            ValueError: No call was timed.
        """
        pooled = [s for t in timings for s in t.seconds]
        if not pooled:
            raise ValueError("no calls were timed")
        medians = tuple(statistics.median(t.seconds) * 1e6 for t in timings if t.seconds)
        cpu = [t.cpu_seconds / len(t.seconds) * 1e6 for t in timings if t.cpu_seconds and t.seconds]
        return cls(
            calls=len(pooled),
            median_us=statistics.median(medians),
            p99_us=percentile(pooled, 99.0) * 1e6,
            mean_us=statistics.fmean(pooled) * 1e6,
            min_us=min(pooled) * 1e6,
            repeat_medians_us=medians,
            failures=sum(t.failures for t in timings),
            cpu_us=statistics.median(cpu) if cpu else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, times rounded to 0.01 us."""
        return {
            "calls": self.calls,
            "median_us": round(self.median_us, 2),
            "p99_us": round(self.p99_us, 2),
            "mean_us": round(self.mean_us, 2),
            "min_us": round(self.min_us, 2),
            "repeat_medians_us": [round(m, 2) for m in self.repeat_medians_us],
            "failures": self.failures,
            "cpu_us": round(self.cpu_us, 2) if self.cpu_us is not None else None,
        }


def time_calls(
    call: Callable[[int], Any],
    n: int,
    *,
    check: Callable[[int, Any], bool] | None = None,
) -> Timing:
    """Time `call(i)` for i in 0..n-1, each call on its own; `check(i, result)` runs untimed.

    The process CPU time of the whole loop is measured too (checks included).
    """
    clock = time.perf_counter
    seconds: list[float] = []
    failures = 0
    cpu = time.process_time()
    for i in range(n):
        start = clock()
        result = call(i)
        seconds.append(clock() - start)
        if check is not None and not check(i, result):
            failures += 1
    cpu = time.process_time() - cpu
    return Timing(seconds=tuple(seconds), failures=failures, cpu_seconds=cpu)


async def time_async_calls(
    call: Callable[[int], Awaitable[Any]],
    n: int,
    *,
    check: Callable[[int, Any], bool] | None = None,
) -> Timing:
    """Time `await call(i)` for i in 0..n-1, each call on its own; `check` runs untimed."""
    clock = time.perf_counter
    seconds: list[float] = []
    failures = 0
    cpu = time.process_time()
    for i in range(n):
        start = clock()
        result = await call(i)
        seconds.append(clock() - start)
        if check is not None and not check(i, result):
            failures += 1
    cpu = time.process_time() - cpu
    return Timing(seconds=tuple(seconds), failures=failures, cpu_seconds=cpu)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _order(names: Sequence[str], repeat: int) -> list[str]:
    """A rotation of `names` (each starts once a round of `len(names)` repeats), backwards
    in odd rounds (each block then follows the one it preceded)."""
    if not names:
        return []
    shift = repeat % len(names)
    order = [*names[shift:], *names[:shift]]
    return order[::-1] if (repeat // len(names)) % 2 else order


def interleave(
    blocks: Sequence[tuple[str, Callable[[int], Timing]]], repeats: int
) -> dict[str, list[Timing]]:
    """Run each named block `repeats` times, in an order that changes every repeat (`_order`).

    A block is called with the repeat number and returns its `Timing`. What exists beforehand is
    frozen out of the garbage collector meanwhile, and the collector runs before each block, so
    one block's garbage is not collected on another's time.

    Returns:
        Each block's timings, one per repeat, in the order they ran.
    """
    runs: dict[str, Callable[[int], Timing]] = dict(blocks)
    out: dict[str, list[Timing]] = {name: [] for name in runs}
    with _frozen_heap():
        for repeat in range(repeats):
            for name in _order(list(runs), repeat):
                gc.collect()
                out[name].append(runs[name](repeat))
    return out


async def interleave_async(
    blocks: Sequence[tuple[str, Callable[[int], Awaitable[Timing]]]], repeats: int
) -> dict[str, list[Timing]]:
    """`interleave` for blocks that are coroutine functions."""
    runs: dict[str, Callable[[int], Awaitable[Timing]]] = dict(blocks)
    out: dict[str, list[Timing]] = {name: [] for name in runs}
    with _frozen_heap():
        for repeat in range(repeats):
            for name in _order(list(runs), repeat):
                gc.collect()
                out[name].append(await runs[name](repeat))
    return out
