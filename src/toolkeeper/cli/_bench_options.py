"""The options of each `toolkeeper bench WHAT`, apart from the benchmarks themselves.

A benchmark's module imports what it measures (the keeper, the gateway, the peers' frameworks),
which takes most of a second; its options here import nothing, so `--help` answers at once. Each
parser's `func` imports the benchmark's `command` when it runs. The defaults are the benchmarks'
own (`tests/cli/test_startup.py` holds the two in step).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
from collections.abc import Callable
from pathlib import Path

from .._console import count

__all__ = ["BENCHES"]

_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def _run(target: str, args: argparse.Namespace) -> int:
    """Run the command `target` ("module:function") names, imported now."""
    module, _, function = target.partition(":")
    command: Callable[[argparse.Namespace], int]
    command = getattr(importlib.import_module(module), function)
    return command(args)


def _later(target: str) -> functools.partial[int]:
    """The command `target` names, imported when it runs (its `.args[0]` says which)."""
    return functools.partial(_run, target)


def _timing(
    parser: argparse.ArgumentParser, *, calls: int, repeats: int, warmup: int, least: int = 1
) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--calls", type=count(1), default=calls, help="timed calls per case and repeat"
    )
    parser.add_argument("--repeats", type=count(1), default=repeats, help="interleaved repeats")
    parser.add_argument(
        "--warmup", type=count(least), default=warmup, help="untimed calls per case first"
    )


def _folder(text: str) -> str:
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    return text


def _executor(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Median per-call time of toolkeeper's whole pipeline for a trivial async tool: "
        "(a) read_only on the in-memory ledger, (b) read_only on SQLite, (c) a write tool on "
        "SQLite; next to pydantic-ai, openai-agents (bare, and inside anyio.fail_after: the "
        "deadline every toolkeeper attempt has) and langchain-core calling the same "
        'function (pip install "toolkeeper[bench]"), in the same process.'
    )
    _timing(parser, calls=500, repeats=20, warmup=200)
    parser.add_argument(
        "--dir",
        default=None,
        type=_folder,
        metavar="PATH",
        help="the folder the SQLite ledgers go in, made if missing (default: a temporary one)",
    )
    parser.set_defaults(func=_later("toolkeeper.cli.bench:run_executor"))


def _retrieval(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "What it is: a catalog of N tools — the union of the benchmark pools (`tools.jsonl` "
        "under `../shared/bench/`) plus generated variants (the same tools re-published under "
        "other server namespaces, as a federation of MCP servers would) — and the figures that "
        "matter at that size: per-query latency p50/p99 including the query embedding, cold "
        "build (every tool embedded), warm load (vectors from the on-disk cache), one tool "
        "added / removed, and the tokens of all definitions vs direct top-K vs progressive "
        "discovery's initial context. What it is not: a quality measure (see `toolkeeper eval "
        "retrieval`)."
    )
    parser.add_argument("--tools", type=count(1), default=10_000, help="catalog size")
    parser.add_argument("--queries", type=count(1), default=300, help="queries per benchmark set")
    parser.add_argument("--k", type=count(1), default=8, help="tools per selection")
    parser.add_argument("--bench-root", type=Path, help="folder holding bfcl/, metatool/, ...")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=_later("toolkeeper.eval.bench_retrieval:command"))


def _gateway(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "What a tool call through the gateway costs, next to the same SDK client calling the "
        "upstream directly, and next to FastMCP's persistent proxy, in one run."
    )
    _timing(parser, calls=300, repeats=5, warmup=30, least=0)
    parser.set_defaults(func=_later("toolkeeper.server.bench:command"))


def _connectors(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Median per-call time of an HTTP read and of a command-line tool through toolkeeper's "
        "whole pipeline, next to a plain httpx2 request and a bare asyncio subprocess."
    )
    _timing(parser, calls=200, repeats=10, warmup=50)
    parser.set_defaults(func=_later("toolkeeper.bench.connectors:command"))


def _agent(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Per-step time of toolkeeper's agent loop (memory and SQLite ledgers) next to "
        "pydantic-ai's Agent and the OpenAI Agents SDK's Runner, all through the real openai "
        "client against a local scripted server, the server's time taken out; and the bytes "
        'a paused run stores (pip install "toolkeeper[bench]").'
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=count(1), default=5, help="runs per repeat")
    parser.add_argument("--repeats", type=count(1), default=5, help="interleaved repeats")
    parser.set_defaults(func=_later("toolkeeper.bench.agent:command"))


def _counts(text: str, what: str = "counts like 1,2,4") -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected {what}, each 1 or more, not {text!r}")
    return values


def _sizes(text: str) -> list[int]:
    return sorted(_counts(text, "sizes like 10000,1000000"))


def _stores(text: str) -> list[str]:
    stores = [part.strip() for part in text.split(",") if part.strip()]
    if not stores or not set(stores) <= {"sqlite", "postgres"}:
        raise argparse.ArgumentTypeError("sqlite, postgres or both (sqlite,postgres)")
    return stores


def _postgres(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--postgres",
        default=os.environ.get("TOOLKEEPER_BENCH_POSTGRES", _POSTGRES),
        help="the PostgreSQL database (a schema is made and dropped in it)",
    )


def _console(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calls",
        type=_sizes,
        default=[10_000, 1_000_000],
        help="ledger sizes to fill, e.g. 10000 or 10000,1000000 (default)",
    )
    parser.add_argument(
        "--approvals", type=count(0), default=10_000, help="approvals in each ledger"
    )
    parser.add_argument("--requests", type=count(1), default=200, help="timed per endpoint")
    parser.add_argument(
        "--stores", type=_stores, default=["sqlite", "postgres"], help="sqlite,postgres"
    )
    _postgres(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_later("toolkeeper.server.console_bench:command"))


def _scale(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Throughput, p50/p99 latency, duplicates, lost records and budget overrun of several "
        "gateway processes on one PostgreSQL ledger (Redis rate limits), loaded by MCP SDK "
        "clients spread round-robin over them."
    )
    parser.add_argument("--processes", type=_counts, default=[1, 2, 4], help="e.g. 1,2,4")
    parser.add_argument("--clients", type=_counts, default=[8, 32], help="e.g. 8,32")
    parser.add_argument("--calls", type=count(1), default=400, help="calls per configuration")
    parser.add_argument(
        "--budget", type=count(0), default=20, help="max_calls_per_task of the budget phase"
    )
    parser.add_argument(
        "--budget-calls", type=count(1), default=100, help="calls of one task in the budget phase"
    )
    parser.add_argument("--no-budget", action="store_true", help="skip the budget phase")
    _postgres(parser)
    parser.add_argument(
        "--redis",
        default=os.environ.get("TOOLKEEPER_BENCH_REDIS", "redis://127.0.0.1:6379/0"),
        help="Redis",
    )
    parser.add_argument(
        "--pool-size",
        type=count(1),
        default=4,
        help="[server] ledger_pool_size: PostgreSQL connections per gateway process",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_later("toolkeeper.bench.scale:command"))


BENCHES: dict[str, tuple[Callable[[argparse.ArgumentParser], None], str]] = {
    "executor": (_executor, "per-call cost of the pipeline vs peers"),
    "retrieval": (_retrieval, "retrieval latency, index build and context tokens at catalog scale"),
    "gateway": (_gateway, "an MCP tool call through the gateway vs direct vs FastMCP's proxy"),
    "connectors": (
        _connectors,
        "an HTTP tool vs plain httpx2, a command-line tool vs a bare subprocess",
    ),
    "agent": (_agent, "the agent loop's time per step vs pydantic-ai and the OpenAI Agents SDK"),
    "console": (
        _console,
        "the operators' API over a ledger of many calls: p50/p99 per endpoint, page sizes",
    ),
    "scale": (
        _scale,
        "gateway processes on one PostgreSQL ledger: throughput, duplicates, lost, budgets",
    ),
}
"""name → (a function adding the benchmark's options and its `func`, one-line help)."""
