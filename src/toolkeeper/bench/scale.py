"""`toolkeeper bench scale`: several gateway processes on one PostgreSQL ledger under load,
measured for throughput, latency and the promises that must hold across processes.

For each number of processes it starts that many `toolkeeper serve` processes (streamable HTTP
on loopback, each on a port of its own) on one PostgreSQL ledger, in a schema of its own that
it creates and drops, with rate limits in Redis (generous enough that nothing is limited).
For each number of clients, that many official MCP SDK clients are spread round-robin over the
processes (a stand-in for a load balancer) and make a fixed number of calls between them,
every call a write with a call id of its own, whose tool appends the call's key to an effects
file (`O_APPEND`). Each configuration reports:

- throughput (calls per second of wall time, all clients together) and p50/p99 latency;
- duplicates: effects written more than once for one call (must be 0);
- lost records: calls answered without a terminal ledger record, and ledger records of calls
  that got no answer (must be 0);
- failures: calls that raised, or were answered with an error.

One more phase sets `max_calls_per_task` and sends calls of one task to every process:
the overrun is how many more than the budget ran (must be 0).

The figures and their text form are in `toolkeeper.bench.scale_report`.
What it is not: a chaos test (no process is killed), nor a tuning guide.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import platform
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import anyio
import anyio.abc

from ..core.errors import sole_cause
from ..core.extras import require
from ..core.states import CallStatus
from .scale_report import BudgetRun, ScaleBench, ScaleRun, render_scale
from .stats import cpu_seconds, percentile

__all__ = ["bench_scale", "command", "run_scale_bench"]

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DEFAULT_CALLS = 400
DEFAULT_BUDGET = 20
DEFAULT_BUDGET_CALLS = 100
DEFAULT_POOL_SIZE = 4

_CLI = "from toolkeeper.cli import main; raise SystemExit(main())"
_TOOL = "bench.write"
_TOKENS = {"bench": "bench-scale-token-not-secret", "budget": "budget-scale-token-not-secret"}
_CALL_ID = "dev.toolkeeper/call-id"
"""The `_meta` key a client names its call id by (docs/gateway-calls.md)."""
_ERROR_CODE = "dev.toolkeeper/error-code"

_TOOLS = '''
import os

EFFECTS = {effects!r}


def register(keeper):
    @keeper.tool(name="bench.write", effect="write", permissions=["bench:write"])
    def write(key: str) -> str:
        """Append `key` to the effects file: one line per time the call ran."""
        fd = os.open(EFFECTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (key + "\\n").encode())
        finally:
            os.close(fd)
        return key
'''

_CONFIG = """
[server]
ledger = {ledger}
port = 0
ledger_pool_size = {pool}
max_requests_per_principal = 10000
max_sessions_per_principal = 10000

[[tools]]
file = {tools}

[budgets]
calls_per_minute = 1000000000.0
burst = 1000000
rate_limiter = {redis}
{budget}
[principals.bench]
token = "{bench}"
grants = ["bench:*"]

[principals.budget]
token = "{budget_token}"
grants = ["bench:*"]
"""


# -- processes -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Site:
    """Where one run keeps its files and what its gateways are given."""

    directory: Path
    ledger: str
    """The ledger URL, its schema chosen by `search_path`."""
    redis: str
    pool: int
    """`[server] ledger_pool_size`: PostgreSQL connections per gateway process."""
    env: dict[str, str]
    """The environment of the gateway processes (with the digest key)."""


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        return None


def _toml(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def _write_config(site: _Site, name: str, *, budget: int | None) -> Path:
    effects = site.directory / f"{name}.effects"
    tools = site.directory / f"{name}_tools.py"
    tools.write_text(_TOOLS.format(effects=str(effects)))
    config = site.directory / f"{name}.toml"
    config.write_text(
        _CONFIG.format(
            ledger=_toml(site.ledger),
            pool=site.pool,
            tools=_toml(str(tools)),
            redis=_toml(site.redis),
            budget="" if budget is None else f"max_calls_per_task = {budget}\n",
            bench=_TOKENS["bench"],
            budget_token=_TOKENS["budget"],
        )
    )
    return config


async def _banner(process: anyio.abc.Process, log: Path) -> str:
    """The URL `serve` prints once it listens."""
    assert process.stdout is not None
    buffer = b""
    marker = b"toolkeeper gateway on "
    try:
        while marker not in buffer or not buffer.split(marker, 1)[1].count(b"\n"):
            buffer += await process.stdout.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        tail = (await anyio.Path(log).read_text(errors="replace"))[-2000:]
        raise RuntimeError(f"a gateway process stopped before listening:\n{tail}") from None
    return buffer.split(marker, 1)[1].split(b"\n", 1)[0].decode().strip()


@dataclass(frozen=True, kw_only=True, slots=True)
class _Fleet:
    """Gateway processes that listen."""

    urls: list[str]
    pids: list[int]


@contextlib.asynccontextmanager
async def _gateways(site: _Site, config: Path, count: int) -> AsyncIterator[_Fleet]:
    """`count` gateway processes on `config`, once all listen; each is stopped
    (SIGTERM, then SIGKILL after 10 s) on the way out, on an error too."""
    processes: list[anyio.abc.Process] = []
    logs: list[Path] = []
    try:
        for i in range(count):
            log = site.directory / f"{config.stem}-{i}.log"
            logs.append(log)
            with log.open("wb") as err:
                processes.append(
                    await anyio.open_process(
                        [sys.executable, "-c", _CLI, "serve", "--config", str(config)],
                        stdout=subprocess.PIPE,
                        stderr=err,
                        env=site.env,
                    )
                )
        urls: list[str] = [""] * count
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:

                async def wait(i: int) -> None:
                    urls[i] = await _banner(processes[i], logs[i])

                for i in range(count):
                    tg.start_soon(wait, i)
        yield _Fleet(urls=urls, pids=[p.pid for p in processes])
    finally:
        with anyio.CancelScope(shield=True):
            for process in processes:
                if process.returncode is None:
                    process.terminate()
            for process in processes:
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                await process.aclose()


# -- load ------------------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class _Load:
    """What the clients of one configuration saw."""

    answers: dict[str, str | None] = field(default_factory=dict)
    """Per call id answered: its error code, None for a success."""
    raised: int = 0
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """Of the load process."""
    gateway_cpu_seconds: float = 0.0


async def _drive(fleet: _Fleet, token: str, *, clients: int, calls: int, tag: str) -> _Load:
    """`calls` calls of `bench.write` by `clients` clients spread over `fleet`; the clock runs
    from when every client is connected to the last answer."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import RequestParamsMeta

    load = _Load()
    connected = 0
    everyone = anyio.Event()
    shares = [calls // clients + (1 if i < calls % clients else 0) for i in range(clients)]

    async def client(i: int) -> None:
        nonlocal connected
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http,
            Client(
                streamable_http_client(fleet.urls[i % len(fleet.urls)], http_client=http)
            ) as mcp,
        ):
            await mcp.list_tools()
            connected += 1
            if connected == clients:
                everyone.set()
            await everyone.wait()
            for j in range(shares[i]):
                key = f"{tag}-{i}-{j}"
                start = time.perf_counter()
                try:
                    meta = cast("RequestParamsMeta", {_CALL_ID: key})
                    result = await mcp.call_tool(_TOOL, {"key": key}, meta=meta)
                except Exception:
                    load.raised += 1
                    continue
                load.latencies.append(time.perf_counter() - start)
                code = (result.meta or {}).get(_ERROR_CODE) if result.is_error else None
                load.answers[key] = str(code or "TOOL_ERROR") if result.is_error else None

    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            for i in range(clients):
                tg.start_soon(client, i)
            await everyone.wait()
            start, cpu = time.perf_counter(), time.process_time()
            gateway_cpu = cpu_seconds(fleet.pids)
        load.seconds = time.perf_counter() - start
        load.cpu_seconds = time.process_time() - cpu
        load.gateway_cpu_seconds = cpu_seconds(fleet.pids) - gateway_cpu
    return load


async def _records(ledger: str, tag: str) -> dict[str, str]:
    """Status by call id of the ledger's calls of `tag`."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(ledger, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT call_id, status FROM calls WHERE call_id LIKE %s", (f"{tag}-%",)
        )
        return {str(call_id): str(status) for call_id, status in await cur.fetchall()}


def _effects(path: Path, tag: str) -> collections.Counter[str]:
    """How many times each call of `tag` ran."""
    if not path.exists():
        return collections.Counter()
    lines = path.read_text().splitlines()
    return collections.Counter(line for line in lines if line.startswith(f"{tag}-"))


def _lost(load: _Load, records: dict[str, str]) -> int:
    terminal = {k for k, status in records.items() if CallStatus(status).terminal}
    return len(load.answers.keys() - terminal) + len(records.keys() - load.answers.keys())


async def _run(site: _Site, fleet: _Fleet, *, processes: int, clients: int, calls: int) -> ScaleRun:
    tag = f"p{processes}c{clients}"
    load = await _drive(fleet, _TOKENS["bench"], clients=clients, calls=calls, tag=tag)
    ran = _effects(site.directory / "main.effects", tag)
    records = await _records(site.ledger, tag)
    latencies = load.latencies or [0.0]
    errors = collections.Counter(code for code in load.answers.values() if code is not None)
    if load.raised:
        errors["RAISED"] = load.raised
    return ScaleRun(
        processes=processes,
        clients=clients,
        calls=calls,
        seconds=load.seconds,
        calls_per_second=len(load.answers) / load.seconds if load.seconds else 0.0,
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        failures=sum(errors.values()),
        duplicates=sum(n - 1 for n in ran.values()),
        lost=_lost(load, records),
        errors=dict(errors),
        client_cpu=load.cpu_seconds / load.seconds if load.seconds else 0.0,
        gateway_cpu=load.gateway_cpu_seconds / load.seconds if load.seconds else 0.0,
    )


async def _budget(
    site: _Site, *, processes: int, clients: int, calls: int, budget: int
) -> BudgetRun:
    config = _write_config(site, "budget", budget=budget)
    async with _gateways(site, config, processes) as fleet:
        load = await _drive(fleet, _TOKENS["budget"], clients=clients, calls=calls, tag="budget")
    ran = _effects(site.directory / "budget.effects", "budget")
    records = await _records(site.ledger, "budget")
    codes = list(load.answers.values())
    refused = codes.count("BUDGET_EXCEEDED")
    return BudgetRun(
        processes=processes,
        clients=clients,
        calls=calls,
        budget=budget,
        ran=len(ran),
        refused=refused,
        failures=load.raised + sum(c is not None for c in codes) - refused,
        duplicates=sum(n - 1 for n in ran.values()),
        lost=_lost(load, records),
    )


# -- the database ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _schema(postgres: str) -> AsyncIterator[str]:
    """A fresh schema on `postgres`, dropped afterwards: the ledger URL that selects it."""
    psycopg = require("psycopg", "postgres", "toolkeeper bench scale")
    schema = f"tk_scale_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(postgres, autocommit=True) as admin:
        await admin.execute(f"CREATE SCHEMA {schema}")
        try:
            separator = "&" if "?" in postgres else "?"
            yield f"{postgres}{separator}options={quote(f'-csearch_path={schema}')}"
        finally:
            with anyio.CancelScope(shield=True):
                await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def _server_version(ledger: str) -> str:
    import psycopg

    async with await psycopg.AsyncConnection.connect(ledger, autocommit=True) as conn:
        cur = await conn.execute("SHOW server_version")
        row = await cur.fetchone()
        return str(row[0]) if row else "?"


async def run_scale_bench(
    *,
    processes: Sequence[int] = (1, 2, 4),
    clients: Sequence[int] = (8, 32),
    calls: int = DEFAULT_CALLS,
    budget: int | None = DEFAULT_BUDGET,
    budget_calls: int = DEFAULT_BUDGET_CALLS,
    postgres: str = DEFAULT_POSTGRES,
    redis: str = DEFAULT_REDIS,
    pool_size: int = DEFAULT_POOL_SIZE,
    directory: str | None = None,
) -> ScaleBench:
    """Run the benchmark: every (processes, clients) configuration, then the budget phase on
    the most processes and clients (skipped when `budget` is None).

    Every process it starts is stopped, and its schema dropped, however it ends.
    """
    load_before = _loadavg()
    runs: list[ScaleRun] = []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        async with _schema(postgres) as ledger:
            env = {**os.environ, "TOOLKEEPER_DIGEST_KEY": secrets.token_urlsafe(32)}
            site = _Site(directory=Path(tmp), ledger=ledger, redis=redis, pool=pool_size, env=env)
            main = _write_config(site, "main", budget=None)
            for count_ in processes:
                async with _gateways(site, main, count_) as fleet:
                    for n in clients:
                        runs.append(
                            await _run(site, fleet, processes=count_, clients=n, calls=calls)
                        )
            phase = None
            if budget is not None:
                phase = await _budget(
                    site,
                    processes=max(processes),
                    clients=min(max(clients), budget_calls),
                    calls=budget_calls,
                    budget=budget,
                )
            postgres_version = await _server_version(ledger)
    return ScaleBench(
        runs=tuple(runs),
        budget=phase,
        environment={
            "cpus": os.cpu_count(),
            "load_average": load_before,
            "load_average_after": _loadavg(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "postgresql": postgres_version,
            "ledger_pool_size": pool_size,
            "tool": f"{_TOOL}: a sync write appending one line to a file (O_APPEND)",
        },
    )


def bench_scale(**options: Any) -> ScaleBench:
    """`run_scale_bench` from synchronous code."""
    return anyio.run(lambda: run_scale_bench(**options))


# -- the command -----------------------------------------------------------------------------


async def _until_stopped(**options: Any) -> ScaleBench | str:
    """`run_scale_bench`, or the name of the signal (SIGTERM, SIGHUP) that stopped it first:
    its gateways are stopped and its schema dropped then too (Ctrl-C does the same)."""
    stopped: list[str] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for signum in signals:
                    stopped.append(signal.Signals(signum).name)
                    tg.cancel_scope.cancel()

        tg.start_soon(watch)
        report = await run_scale_bench(**options)
        tg.cancel_scope.cancel()
    return stopped[0] if stopped else report


def _is_psycopg(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("psycopg")


def command(args: argparse.Namespace) -> int:
    """Run the benchmark `args` (parsed by `toolkeeper bench`) asks for; the exit status."""
    options = {
        "processes": args.processes,
        "clients": args.clients,
        "calls": args.calls,
        "budget": None if args.no_budget else args.budget,
        "budget_calls": args.budget_calls,
        "postgres": args.postgres,
        "redis": args.redis,
        "pool_size": args.pool_size,
    }
    try:
        report = anyio.run(lambda: _until_stopped(**options))
    except Exception as exc:  # a server unreachable, a gateway that would not start
        cause = sole_cause(exc)
        if not isinstance(cause, OSError | RuntimeError | TimeoutError) and not _is_psycopg(cause):
            raise
        print(f"toolkeeper bench scale: {type(cause).__name__}: {cause}", file=sys.stderr)  # noqa: T201
        return 1
    if isinstance(report, str):
        print(f"toolkeeper bench scale: stopped by {report}", file=sys.stderr)  # noqa: T201
        return 1
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))  # noqa: T201 - the command's output
    else:
        print(render_scale(report))  # noqa: T201
    return 0 if report.held else 1
