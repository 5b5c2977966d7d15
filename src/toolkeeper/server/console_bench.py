"""`toolkeeper bench console`: the operators' API and console over a ledger with a long life.

Fills a SQLite and a PostgreSQL ledger (`console_bench_fill`) with many calls and approvals, then
times the API in process (its ASGI app over a keeper on that ledger, as `operator_app` serves
it): the first page of calls newest first, and filtered by tool, by principal and by status;
a call's timeline; the pending approvals; an audit search. Targets: p50 at most 20 ms and p99
at most 100 ms per endpoint on each store, and a console page under 100 KB. Run at several
sizes (`--calls 10000,1000000`), it reports how each figure grows with the ledger.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from .._console import render_table
from ..bench.stats import percentile
from ..config_operators import OperatorConfig
from ..keeper import Keeper
from ..ledger.base import LedgerStore
from .console_bench_fill import Shape, fill_postgres, fill_sqlite

__all__ = ["ConsoleBench", "EndpointFigure", "StoreRun", "command", "run"]

P50_TARGET_MS = 20.0
P99_TARGET_MS = 100.0
PAGE_TARGET_BYTES = 100_000
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
_TOKEN = "bench-operator-token-000000"


@dataclass(frozen=True, kw_only=True, slots=True)
class EndpointFigure:
    """The timings of one endpoint on one ledger."""

    name: str
    """What was asked."""
    p50_ms: float
    """Median latency (milliseconds)."""
    p99_ms: float
    """99th percentile latency (milliseconds)."""
    cpu_ms: float
    """Median CPU time of this process per request (milliseconds): unlike latency, it barely
    moves when other processes compete for the machine."""
    requests: int
    """Requests timed."""
    failures: int
    """Answers that were not 200, or empty where rows were expected."""
    bytes: int
    """Size of the last answer's body."""

    @property
    def met(self) -> bool:
        """Whether it met both targets and never failed."""
        return self.failures == 0 and self.p50_ms <= P50_TARGET_MS and self.p99_ms <= P99_TARGET_MS


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreRun:
    """One store at one size."""

    store: str
    """`sqlite` or `postgres`."""
    calls: int
    """Calls in the ledger."""
    approvals: int
    """Approvals in the ledger."""
    fill_seconds: float
    """How long filling it took."""
    endpoints: tuple[EndpointFigure, ...]
    """The API's figures."""
    pages: dict[str, int] = field(default_factory=dict)
    """Console pages' HTML sizes (bytes), by path."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsoleBench:
    """Every run of the bench."""

    runs: tuple[StoreRun, ...]
    """By store, then size."""

    @property
    def targets_met(self) -> bool:
        """Whether every endpoint met its targets and every page its size."""
        return all(
            all(e.met for e in r.endpoints)
            and all(size < PAGE_TARGET_BYTES for size in r.pages.values())
            for r in self.runs
        )

    def growth(self) -> dict[str, dict[str, float]]:
        """Per store: each endpoint's p50 at the largest size over its p50 at the smallest."""
        out: dict[str, dict[str, float]] = {}
        for store in dict.fromkeys(r.store for r in self.runs):
            runs = sorted((r for r in self.runs if r.store == store), key=lambda r: r.calls)
            if len(runs) < 2:
                continue
            small = {e.name: e.p50_ms for e in runs[0].endpoints}
            out[store] = {
                e.name: round(e.p50_ms / small[e.name], 2)
                for e in runs[-1].endpoints
                if small.get(e.name)
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "targets": {"p50_ms": P50_TARGET_MS, "p99_ms": P99_TARGET_MS},
            "targets_met": self.targets_met,
            "runs": [
                {
                    "store": r.store,
                    "calls": r.calls,
                    "approvals": r.approvals,
                    "fill_seconds": round(r.fill_seconds, 1),
                    "endpoints": [
                        {
                            "name": e.name,
                            "p50_ms": round(e.p50_ms, 2),
                            "p99_ms": round(e.p99_ms, 2),
                            "cpu_ms": round(e.cpu_ms, 2),
                            "requests": e.requests,
                            "failures": e.failures,
                            "bytes": e.bytes,
                        }
                        for e in r.endpoints
                    ],
                    "pages": r.pages,
                }
                for r in self.runs
            ],
            "growth_p50": self.growth(),
        }


def _endpoints(shape: Shape, pick: random.Random) -> dict[str, Callable[[], str]]:
    def timeline() -> str:
        n = pick.randrange(shape.calls)
        return f"/api/v1/calls/task-{n // 20}/call-{n}"

    return {
        "calls newest": lambda: "/api/v1/calls",
        "calls by tool": lambda: f"/api/v1/calls?tool={shape.tool(pick.randrange(1000))}",
        "calls by principal": lambda: (
            f"/api/v1/calls?principal={shape.principal(pick.randrange(1000))}"
        ),
        "calls by status": lambda: "/api/v1/calls?status=FAILED",
        "call timeline": timeline,
        "pending approvals": lambda: "/api/v1/approvals?status=pending",
        "audit search": lambda: f"/api/v1/audit?principal={shape.principal(pick.randrange(1000))}",
    }


async def _time_api(store: LedgerStore, shape: Shape, requests: int) -> StoreRun:
    import httpx2

    from .operator_app import operator_app

    keeper = Keeper(ledger=store)
    app = operator_app(keeper, {"bench": OperatorConfig(token=_TOKEN, role="viewer")})
    pick = random.Random(11)
    figures = []
    headers = {"Authorization": f"Bearer {_TOKEN}"}
    async with (
        keeper,
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url="http://bench", headers=headers
        ) as http,
    ):
        for name, path in _endpoints(shape, pick).items():
            for _ in range(5):  # warm caches, as a running gateway's are
                await http.get(path())
            seconds, cpu, failures, size = [], [], 0, 0
            for _ in range(requests):
                target = path()
                began, began_cpu = time.perf_counter(), time.process_time()
                answer = await http.get(target)
                seconds.append(time.perf_counter() - began)
                cpu.append(time.process_time() - began_cpu)
                size = len(answer.content)
                failures += answer.status_code != 200 or size < 20
            figures.append(
                EndpointFigure(
                    name=name,
                    p50_ms=statistics.median(seconds) * 1e3,
                    p99_ms=percentile(seconds, 99.0) * 1e3,
                    cpu_ms=statistics.median(cpu) * 1e3,
                    requests=requests,
                    failures=failures,
                    bytes=size,
                )
            )
        pages = await _page_sizes(http)
    return StoreRun(
        store="",
        calls=shape.calls,
        approvals=shape.approvals,
        fill_seconds=0.0,
        endpoints=tuple(figures),
        pages=pages,
    )


async def _page_sizes(http: Any) -> dict[str, int]:
    """The HTML size of the console's biggest pages, signed in."""
    import re

    form = await http.get("/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    await http.post(
        "/console/login", data={"csrf": token.group(1) if token else "", "token": _TOKEN}
    )
    out = {}
    for path in ("/console/approvals", "/console/calls", "/console/audit", "/console/unknown"):
        answer = await http.get(path)
        out[path] = len(answer.content) if answer.status_code == 200 else -1
    return out


async def _sqlite(shape: Shape, requests: int) -> StoreRun:
    from ..ledger.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory(prefix="tk-bench-console-") as folder:
        path = str(Path(folder) / "ledger.db")
        made = SQLiteStore(path)
        await made.open()
        await made.aclose()
        began = time.perf_counter()
        await anyio.to_thread.run_sync(fill_sqlite, path, shape)
        filled = time.perf_counter() - began
        run = await _time_api(SQLiteStore(path), shape, requests)
    return _named(run, "sqlite", filled)


async def _postgres(shape: Shape, requests: int, url: str) -> StoreRun:
    import psycopg

    from ..ledger.postgres import PostgresStore

    schema = f"tk_bench_console_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            made = PostgresStore(url, schema=schema)
            await made.open()
            await made.aclose()
            began = time.perf_counter()
            await anyio.to_thread.run_sync(fill_postgres, url, schema, shape)
            filled = time.perf_counter() - began
            store = PostgresStore(url, schema=schema, digest_key=uuid.uuid4().hex * 2)
            run = await _time_api(store, shape, requests)
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return _named(run, "postgres", filled)


def _named(run: StoreRun, store: str, filled: float) -> StoreRun:
    return StoreRun(
        store=store,
        calls=run.calls,
        approvals=run.approvals,
        fill_seconds=filled,
        endpoints=run.endpoints,
        pages=run.pages,
    )


async def run(
    *,
    sizes: list[int],
    approvals: int,
    stores: list[str],
    requests: int = 200,
    postgres: str = DEFAULT_POSTGRES,
    progress: Callable[[str], None] | None = None,
) -> ConsoleBench:
    """Fill each store at each size and time the API on it."""
    runs = []
    for store in stores:
        for calls in sizes:
            shape = Shape(calls=calls, approvals=min(approvals, calls))
            if progress is not None:
                progress(f"{store}: {calls:,} calls, {shape.approvals:,} approvals")
            if store == "sqlite":
                runs.append(await _sqlite(shape, requests))
            else:
                runs.append(await _postgres(shape, requests, postgres))
    return ConsoleBench(runs=tuple(runs))


def render(report: ConsoleBench) -> str:
    """The report as tables."""
    rows = [
        [
            r.store,
            f"{r.calls:,}",
            e.name,
            f"{e.p50_ms:.2f}",
            f"{e.p99_ms:.2f}",
            f"{e.cpu_ms:.2f}",
            e.failures,
            "yes" if e.met else "NO",
        ]
        for r in report.runs
        for e in r.endpoints
    ]
    headers = ["STORE", "CALLS", "ENDPOINT", "P50 MS", "P99 MS", "CPU MS", "FAILED", "MET"]
    out = [render_table(headers, rows)]
    pages = [
        [r.store, f"{r.calls:,}", path, f"{size:,}"]
        for r in report.runs
        for path, size in r.pages.items()
    ]
    out.append(render_table(["STORE", "CALLS", "PAGE", "HTML BYTES"], pages))
    fills = [[r.store, f"{r.calls:,}", f"{r.fill_seconds:.1f}"] for r in report.runs]
    out.append(render_table(["STORE", "CALLS", "FILL S"], fills))
    for store, ratios in report.growth().items():
        shown = ", ".join(f"{name} x{ratio}" for name, ratio in ratios.items())
        out.append(f"{store}: p50 at the largest size over the smallest: {shown}")
    out.append(
        f"targets (p50 <= {P50_TARGET_MS:g} ms, p99 <= {P99_TARGET_MS:g} ms, pages < "
        f"{PAGE_TARGET_BYTES // 1000} KB): {'met' if report.targets_met else 'NOT met'}"
    )
    return "\n\n".join(out)


def command(args: argparse.Namespace) -> int:
    """Run the benchmark `args` (parsed by `toolkeeper bench`) asks for; the exit status."""

    def progress(text: str) -> None:
        print(f"filling {text}...", file=sys.stderr, flush=True)  # noqa: T201 - the command's output

    try:
        report = anyio.run(
            lambda: run(
                sizes=args.calls,
                approvals=args.approvals,
                stores=args.stores,
                requests=args.requests,
                postgres=args.postgres,
                progress=progress,
            )
        )
    except OSError as exc:
        print(f"toolkeeper bench console: {exc}", file=sys.stderr)  # noqa: T201 - the command's output
        return 1
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))  # noqa: T201 - the command's output
    else:
        print(render(report))  # noqa: T201 - the command's output
    return 0 if report.targets_met else 1
