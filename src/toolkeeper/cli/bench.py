"""`toolkeeper bench WHAT`: performance benchmarks, one sub-command each.

A benchmark is one entry of `_bench_options.BENCHES`: its name, the function adding its
options, and a one-line help. Its module is imported only when that benchmark runs, so
`--help` is quick and one benchmark's dependencies never slow down or break another's.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .._console import render_table
from . import _HELP, _Parser
from ._bench_options import BENCHES

if TYPE_CHECKING:
    from ..bench.report import ExecutorBench

__all__ = ["register", "render_executor", "run_executor"]


def register(subparsers: Any) -> None:
    """Add `bench` and one sub-command per entry of `BENCHES`."""
    parser = subparsers.add_parser(
        "bench",
        help=_HELP["bench"],
    )
    sub = parser.add_subparsers(
        dest="bench_command", metavar="WHAT", required=True, parser_class=_Parser
    )
    for name, (configure, help_text) in BENCHES.items():
        configure(sub.add_parser(name, help=help_text, description=help_text))


def run_executor(args: argparse.Namespace) -> int:
    """Run `toolkeeper bench executor` as `args` say; the exit status."""
    from ..bench.executor import bench_executor

    def progress(line: str) -> None:
        if not args.json:
            print(f"… {line}", file=sys.stderr, flush=True)

    report = bench_executor(
        calls=args.calls,
        repeats=args.repeats,
        warmup=args.warmup,
        directory=args.dir,
        progress=progress,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render_executor(report))
    return 0 if report.all_calls_succeeded else 1


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if unit == "x" else f"{_us(value)} us"


def _verdict(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[met]


def render_executor(report: ExecutorBench) -> str:
    """The executor benchmark as text tables: cases, ratios and targets."""
    env = report.environment
    peers = [c for c in report.cases if not c.key.startswith("toolkeeper.")]
    measured = [p for p in peers if p.summary is not None]
    ratios = report.ratios
    rows: list[list[object]] = []
    for case in report.cases:
        s = case.summary
        ratio_cells = [
            f"{ratios[case.key][p.key]:.2f}x" if case.key in ratios else "" for p in measured
        ]
        if s is None:
            rows.append([case.label, case.version or "", case.status])
            continue
        spread = f"{min(s.repeat_medians_us):,.1f}-{max(s.repeat_medians_us):,.1f}"
        ok = "ok" if s.failures == 0 else f"{s.failures} wrong"
        cells = [
            case.label,
            case.version or "",
            ok,
            _us(s.median_us),
            _us(s.p99_us),
            spread,
            _us(s.cpu_us),
        ]
        rows.append([*cells, *ratio_cells])
    headers = ["case", "version", "status", "median us", "p99 us", "repeat medians", "cpu us"]
    headers += [f"/ {p.label.split()[0]}" for p in measured]
    lines = [
        f"toolkeeper bench executor: {report.calls} calls x {report.repeats} repeats per case "
        f"(after {report.warmup} warm-up calls), interleaved, one process",
        f"Python {env.get('python')} on {env.get('platform')}, {env.get('cpus')} CPUs, "
        f"load average {env.get('load_average')} -> {env.get('load_average_after')}",
        "tool: async def add(a: int, b: int) -> int; JSON-string arguments; a new call id each",
        "",
        render_table(headers, [_pad(r, len(headers)) for r in rows]),
        "",
        "median = median of the per-repeat medians; '/ peer' = toolkeeper median / peer median;",
        "cpu us = process CPU time per call (steady under outside load, but without I/O waits)",
    ]
    paired = report.paired_ratios
    for key, by_peer in paired.items():
        if by_peer:
            shown = ", ".join(f"{peer} {ratio:.2f}x" for peer, ratio in by_peer.items())
            lines.append(f"  {key}, repeat by repeat (median of the ratios): {shown}")
    for case in report.cases:
        if case.note:
            lines.append(f"  {case.label}: {case.note}")
    lines += [
        "",
        render_table(
            ["target", "measured", "bound", "met"],
            [
                [
                    t.description,
                    _figure(t.measured, t.unit),
                    _figure(t.limit, t.unit),
                    _verdict(t.met),
                ]
                for t in report.targets
            ],
        ),
    ]
    return "\n".join(lines)


def _pad(row: list[object], width: int) -> list[object]:
    return row + [""] * (width - len(row))
