"""The connectors benchmark: what a call through toolkeeper's HTTP and command-line connectors
costs next to doing the same request or spawn by hand, measured in one process and one run.

Cases (each toolkeeper call gets a fresh call id and its arguments as a JSON string):

- `http.toolkeeper`: a read-only HTTP tool (`GET /items/{id}`) through a `Keeper` on the
  in-memory ledger: the whole pipeline, the SSRF-checked transport, the response read and
  parsed; `http.httpx2`: a plain `httpx2.AsyncClient.get` of the same URL and `.json()`;
- `command.toolkeeper`: a read-only command-line tool (`echo {text}`) through the same
  pipeline; `command.bare`: `asyncio.create_subprocess_exec` of the same program with its
  output read (`communicate()`).

The HTTP server is a small asyncio HTTP/1.1 server in a child process on 127.0.0.1 (keep-alive,
one fixed JSON answer per path), so it takes no CPU from the client's process. The blocks are
interleaved and repeated (see `stats.py`); a target is the median over the repeats of the
ratio of the two medians of one repeat (`report.paired_ratio`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._console import render_table
from ..catalog.registry import Tool
from ..connectors.command import CommandConnector, CommandParams
from ..core.states import CallStatus
from ..core.values import Effect, Principal, ToolCall, ToolSpec
from ..keeper import Keeper
from .executor import _environment
from .peers import version_of
from .report import CaseReport, Target, paired_ratio
from .stats import Summary, Timing, interleave_async, time_async_calls

__all__ = ["ConnectorsBench", "command", "run_connectors_bench"]

TARGETS = {"http": 1.3, "command": 1.2}
"""The most a toolkeeper call may take, as a multiple of the plain call, paired by repeat."""

_BENCH = Principal(id="bench", grants=frozenset({"*"}))

_SERVER = r"""
import asyncio, sys

async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1]
            body = b'{"id": "' + path.rsplit(b"/", 1)[-1] + b'"}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""
"""The HTTP server of the benchmark (a child process; prints its port, serves until killed)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Case:
    key: str
    label: str
    call: Callable[[str, int], Awaitable[Any]]
    check: Callable[[Any, int], bool]


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectorsBench:
    """The report of one run of the connectors benchmark."""

    calls: int
    """Timed calls per case and repeat."""
    repeats: int
    """Interleaved repeats of every case."""
    cases: tuple[CaseReport, ...]
    """Each case, measured or not."""
    targets: tuple[Target, ...]
    """The issue's targets, checked."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Python, platform, CPUs and load average."""

    @property
    def cpu_ratios(self) -> dict[str, float]:
        """Toolkeeper's CPU time per call over the plain call's, per kind: steadier than wall
        time when other processes compete for the CPU (but blind to I/O waits)."""
        by_key = {c.key: c.summary for c in self.cases}
        out = {}
        for kind, plain in (("http", "http.httpx2"), ("command", "command.bare")):
            own, other = by_key.get(f"{kind}.toolkeeper"), by_key.get(plain)
            if own and other and own.cpu_us and other.cpu_us:
                out[kind] = round(own.cpu_us / other.cpu_us, 3)
        return out

    @property
    def all_calls_succeeded(self) -> bool:
        """Whether every timed call returned the right result."""
        return all(c.summary is not None and c.summary.failures == 0 for c in self.cases)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report of `toolkeeper bench connectors --json`."""
        return {
            "bench": "connectors",
            "unit": "microseconds per call",
            "calls": self.calls,
            "repeats": self.repeats,
            "median": "median of the per-repeat medians; p99 over all timed calls",
            "paired": "median over the repeats of one repeat's toolkeeper median / plain median",
            "environment": self.environment,
            "cases": {c.key: c.to_dict() for c in self.cases},
            "targets": {t.key: t.to_dict() for t in self.targets},
            "cpu_ratios": self.cpu_ratios,
            "targets_met": all(t.met is True for t in self.targets),
            "all_calls_succeeded": self.all_calls_succeeded,
        }


async def _start_server(stack: AsyncExitStack) -> int:
    process = await anyio.open_process([sys.executable, "-c", _SERVER], stderr=subprocess.DEVNULL)
    stack.push_async_callback(process.aclose)
    stack.callback(process.kill)
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        line += await process.stdout.receive(64)
    return int(line)


async def _http_cases(stack: AsyncExitStack, port: int) -> list[_Case]:
    import httpx2

    from ..connectors._http_guard import AddressPolicy
    from ..connectors._openapi import plain_operation
    from ..connectors.http import HttpParams, HttpSource

    url = f"http://127.0.0.1:{port}"
    params = HttpParams(
        name="bench", base_url=url, addresses=AddressPolicy.of(allow_networks=["127.0.0.1/32"])
    )
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    op = plain_operation("get_item", method="GET", path="/items/{id}", input_schema=schema)
    source = await stack.enter_async_context(HttpSource(params, [op]))
    keeper = await stack.enter_async_context(Keeper(ledger="memory://", principal=_BENCH))
    for tool in source.tools:
        keeper.add(tool)
    client = await stack.enter_async_context(httpx2.AsyncClient(base_url=url, trust_env=False))
    execute = keeper.execute

    async def through_toolkeeper(call_id: str, i: int) -> Any:
        arguments = json.dumps({"id": str(i)})
        result = await execute(
            ToolCall(call_id=call_id, name="bench.get_item", arguments=arguments)
        )
        return result.data if result.status is CallStatus.SUCCEEDED else result.error

    async def plain(call_id: str, i: int) -> Any:
        return (await client.get(f"/items/{i}")).json()

    def check(data: Any, i: int) -> bool:
        return bool(data == {"id": str(i)})

    return [
        _Case(
            key="http.toolkeeper",
            label="HTTP GET via toolkeeper",
            call=through_toolkeeper,
            check=check,
        ),
        _Case(key="http.httpx2", label="HTTP GET, plain httpx2", call=plain, check=check),
    ]


async def _command_cases(stack: AsyncExitStack) -> list[_Case]:
    program = "/bin/echo"
    connector = CommandConnector(CommandParams(argv=(program, "{text}")))
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    spec = ToolSpec(name="bench.echo", input_schema=schema, effect=Effect.READ_ONLY)
    keeper = await stack.enter_async_context(Keeper(ledger="memory://", principal=_BENCH))
    keeper.add(Tool(spec=spec, connector=connector))
    execute = keeper.execute

    async def through_toolkeeper(call_id: str, i: int) -> Any:
        arguments = json.dumps({"text": f"item {i}"})
        result = await execute(ToolCall(call_id=call_id, name="bench.echo", arguments=arguments))
        return result.data["stdout"] if result.status is CallStatus.SUCCEEDED else result.error

    async def bare(call_id: str, i: int) -> Any:
        process = await asyncio.create_subprocess_exec(
            program,
            f"item {i}",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        return out.decode()

    def check(data: Any, i: int) -> bool:
        return bool(data == f"item {i}\n")

    return [
        _Case(
            key="command.toolkeeper",
            label="echo via toolkeeper",
            call=through_toolkeeper,
            check=check,
        ),
        _Case(
            key="command.bare", label="echo, bare create_subprocess_exec", call=bare, check=check
        ),
    ]


def _block(case: _Case, calls: int, tag: str) -> Callable[[int], Awaitable[Timing]]:
    async def block(repeat: int) -> Timing:
        ids = [f"{case.key}-{tag}-{repeat}-{i}" for i in range(calls)]
        call = case.call
        return await time_async_calls(
            lambda i: call(ids[i], i), calls, check=lambda i, r: case.check(r, i)
        )

    return block


async def run_connectors_bench(
    *,
    calls: int = 200,
    repeats: int = 10,
    warmup: int = 50,
    progress: Callable[[str], None] | None = None,
) -> ConnectorsBench:
    """Measure every case in this process and return the report.

    Raises:
        ValueError: `calls` or `repeats` is below 1.
    """
    if calls < 1 or repeats < 1:
        raise ValueError("calls and repeats must be at least 1")
    say = progress or (lambda _line: None)
    environment = _environment()
    run = uuid.uuid4().hex[:8]
    async with AsyncExitStack() as stack:
        say("starting the HTTP server")
        port = await _start_server(stack)
        cases = [*await _http_cases(stack, port), *await _command_cases(stack)]
        for case in cases:
            say(f"warming up {case.label}")
            await _block(case, max(warmup, 1), f"{run}-warm")(0)
        say(f"measuring {len(cases)} cases: {calls} calls x {repeats} repeats")
        timings = await interleave_async([(c.key, _block(c, calls, run)) for c in cases], repeats)
    reports = {
        c.key: CaseReport(
            key=c.key,
            label=c.label,
            status="ok",
            version=version_of("toolkeeper"),
            summary=Summary.of(timings[c.key]),
        )
        for c in cases
    }
    environment["load_average_after"] = _environment()["load_average"]
    targets = []
    for kind, peer, words in (
        ("http", "http.httpx2", "an HTTP read via toolkeeper vs plain httpx2"),
        ("command", "command.bare", "a command via toolkeeper vs bare create_subprocess_exec"),
    ):
        own, other = reports[f"{kind}.toolkeeper"].summary, reports[peer].summary
        ratio = paired_ratio(own, other) if own and other else None
        limit = TARGETS[kind]
        targets.append(
            Target(
                key=f"{kind}_ratio",
                description=f"{words}: <= {limit:g}x, paired in the same run",
                measured=ratio,
                limit=limit,
                unit="x",
                met=None if ratio is None else ratio <= limit,
            )
        )
    return ConnectorsBench(
        calls=calls,
        repeats=repeats,
        cases=tuple(reports.values()),
        targets=tuple(targets),
        environment=environment,
    )


def render_connectors(report: ConnectorsBench) -> str:
    """The report as text tables."""
    env = report.environment
    rows = []
    for case in report.cases:
        s = case.summary
        assert s is not None
        ok = "ok" if s.failures == 0 else f"{s.failures} wrong"
        rows.append(
            [case.label, ok, f"{s.median_us:,.1f}", f"{s.p99_us:,.1f}", f"{s.cpu_us or 0:,.1f}"]
        )
    targets = [
        [
            t.description,
            "-" if t.measured is None else f"{t.measured:.3f}x",
            f"{t.limit:g}x",
            {True: "yes", False: "NO", None: "n/a"}[t.met],
        ]
        for t in report.targets
    ]
    return "\n".join(
        [
            f"toolkeeper bench connectors: {report.calls} calls x {report.repeats} repeats per "
            "case, interleaved, one process (the HTTP server in a child process)",
            f"Python {env.get('python')} on {env.get('platform')}, {env.get('cpus')} CPUs, "
            f"load average {env.get('load_average')} -> {env.get('load_average_after')}",
            "",
            render_table(["case", "status", "median us", "p99 us", "cpu us"], rows),
            "",
            render_table(["target", "measured", "bound", "met"], targets),
            "CPU time per call, toolkeeper / plain: "
            + ", ".join(f"{kind} {ratio:.2f}x" for kind, ratio in report.cpu_ratios.items()),
        ]
    )


def command(args: argparse.Namespace) -> int:
    """Run the benchmark `args` (parsed by `toolkeeper bench`) asks for; the exit status."""

    def progress(line: str) -> None:
        if not args.json:
            print(f"… {line}", file=sys.stderr, flush=True)  # noqa: T201

    async def main() -> ConnectorsBench:
        return await run_connectors_bench(
            calls=args.calls, repeats=args.repeats, warmup=args.warmup, progress=progress
        )

    report = anyio.run(main)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))  # noqa: T201 - the command's output
    else:
        print(render_connectors(report))  # noqa: T201
    return 0 if report.all_calls_succeeded else 1
