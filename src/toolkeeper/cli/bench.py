"""`toolkeeper bench WHAT`: performance benchmarks, one sub-command each.

A benchmark is one entry of `_BENCHES`: its name, the `module:function` that configures its
parser (adds options and sets `func`), and a one-line help. The module is imported only when
that benchmark is run or asked for `--help`, so one benchmark's dependencies never slow down or
break another's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._console import count, render_table
from . import _Parser

if TYPE_CHECKING:
    from ..bench.report import ExecutorBench

__all__ = ["configure_executor", "register", "render_executor"]

# name → ("module:function" configuring its parser, help)
_BENCHES: dict[str, tuple[str, str]] = {
    "executor": (f"{__name__}:configure_executor", "per-call cost of the pipeline vs peers"),
    "retrieval": (
        "toolkeeper.eval.bench_retrieval:configure_retrieval",
        "retrieval latency, index build and context tokens at catalog scale",
    ),
    "gateway": (
        "toolkeeper.server.bench:configure_gateway",
        "an MCP tool call through the gateway vs direct vs FastMCP's proxy",
    ),
    "connectors": (
        "toolkeeper.bench.connectors:configure_connectors",
        "an HTTP tool vs plain httpx2, a command-line tool vs a bare subprocess",
    ),
    "agent": (
        "toolkeeper.bench.agent:configure_agent",
        "the agent loop's time per step vs pydantic-ai and the OpenAI Agents SDK",
    ),
    "console": (
        "toolkeeper.server.console_bench:configure_console",
        "the operators' API over a ledger of many calls: p50/p99 per endpoint, page sizes",
    ),
    "scale": (
        "toolkeeper.bench.scale:configure_scale",
        "gateway processes on one PostgreSQL ledger: throughput, duplicates, lost, budgets",
    ),
}


class _LazyParser(_Parser):
    """A sub-parser whose options are added by a function imported on first use."""

    def __init__(self, *args: Any, configure: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._configure = configure

    def _load(self) -> None:
        if self._configure:
            module, _, function = self._configure.partition(":")
            configure: Callable[[argparse.ArgumentParser], None] = getattr(
                importlib.import_module(module), function
            )
            self._configure = ""
            configure(self)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self._load()
        return super().parse_known_args(*args, **kwargs)

    def format_help(self) -> str:
        self._load()
        return super().format_help()


def register(subparsers: Any) -> None:
    """Add `bench` and one sub-command per entry of `_BENCHES`."""
    parser = subparsers.add_parser(
        "bench",
        help="time the executor, gateway, agent, connectors, console and retrieval next to "
        "peers, and scale over processes",
    )
    sub = parser.add_subparsers(
        dest="bench_command", metavar="WHAT", required=True, parser_class=_LazyParser
    )
    for name, (configure, help_text) in _BENCHES.items():
        sub.add_parser(name, help=help_text, description=help_text, configure=configure)


def configure_executor(parser: argparse.ArgumentParser) -> None:
    """Options of `toolkeeper bench executor`."""
    from ..bench.executor import DEFAULT_CALLS, DEFAULT_REPEATS, DEFAULT_WARMUP

    parser.description = (
        "Median per-call time of toolkeeper's whole pipeline for a trivial async tool: "
        "(a) read_only on the in-memory ledger, (b) read_only on SQLite, (c) a write tool on "
        "SQLite; next to pydantic-ai, openai-agents and langchain-core calling the same "
        'function (pip install "toolkeeper[bench]"), in the same process.'
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--calls", type=count(1), default=DEFAULT_CALLS, help="timed calls per case and repeat"
    )
    parser.add_argument(
        "--repeats", type=count(1), default=DEFAULT_REPEATS, help="interleaved repeats"
    )
    parser.add_argument(
        "--warmup", type=count(1), default=DEFAULT_WARMUP, help="untimed calls per case first"
    )
    parser.add_argument(
        "--dir",
        default=None,
        type=_folder,
        metavar="PATH",
        help="the folder the SQLite ledgers go in, made if missing (default: a temporary one)",
    )
    parser.set_defaults(func=_executor)


def _folder(text: str) -> str:
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    return text


def _executor(args: argparse.Namespace) -> int:
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
