"""`toolkeeper bench gateway`: what a tool call through the gateway costs, next to the same SDK
client calling the upstream directly, and next to FastMCP's persistent proxy, in one run.

Every case uses the official SDK client over stdio and calls `get_current_time` of
`mcp-server-time` (a real upstream from PyPI, over stdio):

- `direct`: the client talks to the upstream itself;
- `gateway`: the client talks to `toolkeeper serve --stdio` (SQLite ledger, one principal,
  `direct` exposure), which runs every call through the executor and the upstream connector;
- `fastmcp_proxy`: the client talks to a FastMCP proxy whose backend client stays connected
  (FastMCP's persistent proxy; needs `pip install "toolkeeper[bench]"`).

Calls are timed one by one; cases are interleaved over repeats (their order rotating), and
each figure is the median of the per-repeat medians; p99 is over all calls.

`fastmcp_proxy_p50_vs_direct` bounds the second target of issue 5: a gateway forwards every
call to the same upstream, so it cannot beat `direct`, and FastMCP's proxy can be at most
that many times slower than it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from mcp import Client, StdioServerParameters

from ..bench.stats import Summary, Timing, cpu_seconds, interleave_async, time_async_calls

__all__ = ["GatewayBench", "bench_gateway", "command"]

_TOOL_ARGS = {"timezone": "UTC"}

_PROXY = """
import sys
import anyio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


async def main() -> None:
    backend = Client(StdioTransport(command=sys.executable, args=["-m", "mcp_server_time"]))
    async with backend:
        proxy = create_proxy(backend, name="fastmcp-proxy")
        await proxy.run_stdio_async(show_banner=False, log_level="ERROR")


anyio.run(main)
"""

_CONFIG = """
[server]
ledger = "sqlite:///{ledger}"
stdio_principal = "bench"

[upstreams.time]
command = "{python}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
trust_hints = true

[principals.bench]
token = "bench-token-not-secret"
grants = ["time:*"]
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayBench:
    """The figures of one run."""

    cases: dict[str, Summary | None]
    """Per case: its summary, or None when it could not run."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Why a case did not run."""
    cpu_us: dict[str, float] = field(default_factory=dict)
    """Per case: CPU microseconds per call over all its processes (client, gateway or proxy,
    upstream), median over repeats; independent of how busy the machine is (Linux only)."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Python, platform, calls and repeats."""

    def ratio(self, a: str, b: str, figure: str = "median_us") -> float | None:
        """`a`'s figure divided by `b`'s, when both ran."""
        sa, sb = self.cases.get(a), self.cases.get(b)
        if sa is None or sb is None:
            return None
        return float(getattr(sa, figure)) / float(getattr(sb, figure))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with cases, ratios and the targets of issue 5."""
        gateway_vs_direct = self.ratio("gateway", "direct")
        proxy_vs_gateway = self.ratio("fastmcp_proxy", "gateway")
        cpu_direct = self.cpu_us.get("direct")
        return {
            "cases": {k: (v.to_dict() if v else None) for k, v in self.cases.items()},
            "cpu_us_per_call": {k: round(v, 1) for k, v in self.cpu_us.items()},
            "cpu_ratios": {
                f"{k}_vs_direct": round(v / cpu_direct, 3)
                for k, v in self.cpu_us.items()
                if cpu_direct and k != "direct"
            },
            "skipped": self.skipped,
            "ratios": {
                "gateway_p50_vs_direct": _round(gateway_vs_direct),
                "gateway_p99_vs_direct": _round(self.ratio("gateway", "direct", "p99_us")),
                "fastmcp_proxy_p50_vs_gateway": _round(proxy_vs_gateway),
                "fastmcp_proxy_p99_vs_gateway": _round(
                    self.ratio("fastmcp_proxy", "gateway", "p99_us")
                ),
                "fastmcp_proxy_p50_vs_direct": _round(self.ratio("fastmcp_proxy", "direct")),
            },
            "targets": {
                "gateway_p50_at_most_2x_direct": _met(gateway_vs_direct, lambda r: r <= 2.0),
                "at_least_2x_faster_than_fastmcp_proxy": _met(proxy_vs_gateway, lambda r: r >= 2.0),
            },
            "environment": self.environment,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _met(value: float | None, test: Callable[[float], bool]) -> bool | None:
    return None if value is None else test(value)


def _fastmcp_available() -> bool:
    try:
        import fastmcp  # noqa: F401
    except ImportError:
        return False
    return True


def _descendants(pid: int) -> set[int]:
    """Process ids below `pid` (Linux `/proc`; empty elsewhere)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(entry.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


async def _measure(
    servers: dict[str, tuple[StdioServerParameters, str]],
    *,
    calls: int,
    repeats: int,
    warmup: int,
    cpu: dict[str, list[float]],
) -> dict[str, list[Timing]]:
    """Time each case; `cpu` receives each case's CPU seconds per call (its client's and its
    servers' processes), one figure per repeat, where `/proc` exists."""
    clients: dict[str, tuple[Client, str]] = {}
    pids: dict[str, set[int]] = {}
    async with anyio.create_task_group() as tg:
        stops: list[anyio.Event] = []

        async def hold(
            name: str,
            params: StdioServerParameters,
            tool: str,
            *,
            task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
        ) -> None:
            stop = anyio.Event()
            stops.append(stop)
            async with Client(params, cache=None) as client:
                clients[name] = (client, tool)
                task_status.started()
                await stop.wait()

        with anyio.fail_after(120):
            for name, (params, tool) in servers.items():
                before = _descendants(os.getpid())
                await tg.start(hold, name, params, tool)
                pids[name] = _descendants(os.getpid()) - before

        for client, tool in clients.values():
            for _ in range(warmup):
                await client.call_tool(tool, dict(_TOOL_ARGS))

        def block(name: str, client: Client, tool: str) -> Callable[[int], Awaitable[Timing]]:
            async def run(_repeat: int) -> Timing:
                start = time.process_time() + cpu_seconds(pids[name])
                timing = await time_async_calls(
                    lambda _i: client.call_tool(tool, dict(_TOOL_ARGS)),
                    calls,
                    check=lambda _i, result: not result.is_error,
                )
                spent = time.process_time() + cpu_seconds(pids[name]) - start
                cpu.setdefault(name, []).append(spent / calls)
                return timing

            return run

        timings = await interleave_async(
            [(name, block(name, c, t)) for name, (c, t) in clients.items()], repeats
        )
        for stop in stops:
            stop.set()
    return timings


def bench_gateway(
    *, calls: int = 300, repeats: int = 5, warmup: int = 30, directory: str | None = None
) -> GatewayBench:
    """Run the benchmark (spawns the upstream, the gateway and the proxy as subprocesses)."""
    python = sys.executable
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(_CONFIG.format(ledger=Path(tmp) / "ledger.db", python=python))
        servers = {
            "direct": (
                StdioServerParameters(command=python, args=["-m", "mcp_server_time"]),
                "get_current_time",
            ),
            "gateway": (
                StdioServerParameters(
                    command=python,
                    args=[
                        "-c",
                        "from toolkeeper.cli import main; raise SystemExit(main())",
                        "serve",
                        "--config",
                        str(config),
                        "--stdio",
                    ],
                ),
                "time.get_current_time",
            ),
        }
        if _fastmcp_available():
            servers["fastmcp_proxy"] = (
                StdioServerParameters(
                    command=python, args=["-c", _PROXY], env={"FASTMCP_LOG_LEVEL": "ERROR"}
                ),
                "get_current_time",
            )
        else:
            skipped["fastmcp_proxy"] = 'fastmcp is not installed: pip install "toolkeeper[bench]"'
        cpu: dict[str, list[float]] = {}
        timings = anyio.run(
            lambda: _measure(servers, calls=calls, repeats=repeats, warmup=warmup, cpu=cpu)
        )
    cases: dict[str, Summary | None] = {name: Summary.of(t) for name, t in timings.items()}
    for name in skipped:
        cases[name] = None
    return GatewayBench(
        cases=cases,
        skipped=skipped,
        cpu_us={name: statistics.median(v) * 1e6 for name, v in cpu.items() if v},
        environment={
            "python": platform.python_version(),
            "platform": platform.platform(),
            "calls": calls,
            "repeats": repeats,
            "warmup": warmup,
            "upstream": "mcp-server-time get_current_time over stdio",
            "ledger": "sqlite",
        },
    )


def command(args: argparse.Namespace) -> int:
    """Run the benchmark `args` (parsed by `toolkeeper bench`) asks for; the exit status."""
    report = bench_gateway(calls=args.calls, repeats=args.repeats, warmup=args.warmup)
    data = report.to_dict()
    if args.json:
        print(json.dumps(data, indent=2))  # noqa: T201 - the command's output
    else:
        for name, case in data["cases"].items():
            figures = (
                f"p50 {case['median_us'] / 1000:.2f} ms  p99 {case['p99_us'] / 1000:.2f} ms"
                if case
                else f"skipped: {data['skipped'].get(name)}"
            )
            print(f"{name:15} {figures}")  # noqa: T201
        for name, value in data["ratios"].items():
            print(f"{name:30} {value}")  # noqa: T201
        for name, value in data["cpu_us_per_call"].items():
            print(f"cpu per call {name:17} {value / 1000:.2f} ms")  # noqa: T201
        for name, met in data["targets"].items():
            print(f"{name:40} {'yes' if met else 'NO' if met is False else 'n/a'}")  # noqa: T201
    failures = sum(c.failures for c in report.cases.values() if c is not None)
    return 0 if failures == 0 else 1
