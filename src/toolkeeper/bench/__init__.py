"""Benchmarks: what toolkeeper costs, measured next to its peers (`toolkeeper bench ...`).

Not imported by `import toolkeeper`. The peer frameworks come with the `[bench]` extra
(`pip install "toolkeeper[bench]"`); without them only toolkeeper's own cases are measured.
"""

from .executor import bench_executor, run_executor_bench
from .report import CaseReport, ExecutorBench, Target
from .stats import (
    Summary,
    Timing,
    interleave,
    interleave_async,
    percentile,
    time_async_calls,
    time_calls,
)

__all__ = [
    "CaseReport",
    "ExecutorBench",
    "Summary",
    "Target",
    "Timing",
    "bench_executor",
    "interleave",
    "interleave_async",
    "percentile",
    "run_executor_bench",
    "time_async_calls",
    "time_calls",
]
