"""The executor benchmark: what one tool call costs through toolkeeper's whole pipeline, next to
the tool-call paths of other frameworks, measured in one process on one function.

Cases (each call gets a fresh call id and its arguments as a JSON string, as a model sends them):

- (a) toolkeeper, a read-only tool, in-memory ledger (its default audit sink: in memory);
- (b) toolkeeper, the same tool, SQLite ledger (WAL; audit: a JSON lines file beside the DB);
- (c) toolkeeper, a write tool on SQLite: RUNNING committed before the effect, then the end;
- (a) with OpenTelemetry on (`toolkeeper[otel]`): the SDK makes and ends every span and counts
  every call; its exporter drops the spans (what is measured is toolkeeper's telemetry, not an
  exporter's network);
- the peers of `peers.py`: pydantic-ai, openai-agents, langchain-core.

Every case calls the same `async def add(a: int, b: int) -> int`. The blocks are interleaved
and repeated (see `stats.py`); the headline is the median of the per-repeat medians. What is
measured is a toolkeeper `Keeper` as a user gets it: no sink or gate is switched off.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from ..core.states import CallStatus
from ..core.values import Effect, Principal, ToolCall, ToolResult
from ..keeper import Keeper
from ..observe.telemetry import Telemetry
from .peers import PEERS, Case, Peer, PeerUnavailable, version_of
from .report import CaseReport, ExecutorBench, Target, paired_ratio
from .stats import Summary, Timing, interleave_async, time_async_calls

__all__ = [
    "DEFAULT_CALLS",
    "DEFAULT_REPEATS",
    "DEFAULT_WARMUP",
    "add",
    "bench_executor",
    "run_executor_bench",
]

DEFAULT_CALLS = 500
DEFAULT_REPEATS = 20
DEFAULT_WARMUP = 200

MEMORY = "toolkeeper.memory"
SQLITE = "toolkeeper.sqlite"
SQLITE_WRITE = "toolkeeper.sqlite_write"
MEMORY_OTEL = "toolkeeper.memory_otel"
OTEL_LABEL = "(a) with OpenTelemetry on"
OTEL_TARGET = 1.25
"""The most case (a) may take with OpenTelemetry on, as a multiple of (a) off, paired."""


async def add(a: int, b: int) -> int:
    """Add two integers: the trivial tool every case calls.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


def _succeeded(result: Any, expected: int) -> bool:
    return (
        isinstance(result, ToolResult)
        and result.status is CallStatus.SUCCEEDED
        and result.data == expected
    )


_BENCH = Principal(id="bench", grants=frozenset({"*"}))
"""The benchmark, acting for itself (as the peers' bare tool calls do)."""


async def _toolkeeper_case(
    stack: AsyncExitStack,
    key: str,
    label: str,
    ledger: str,
    effect: Effect,
    telemetry: Telemetry | None = None,
) -> tuple[Case, str]:
    keeper = Keeper(ledger=ledger, principal=_BENCH, telemetry=telemetry)
    keeper.add_function(add, effect=effect)
    await stack.enter_async_context(keeper)
    execute = keeper.execute

    async def invoke(call_id: str, arguments: str) -> Any:
        return await execute(ToolCall(call_id=call_id, name="add", arguments=arguments))

    audit = keeper.audit
    where = getattr(audit, "path", None)
    note = f"ledger {ledger}; audit {type(audit).__name__}" + (f" ({where})" if where else "")
    if telemetry is not None:
        note += "; OpenTelemetry SDK: every span ended and handed to a dropping exporter"
    case = Case(
        key=key,
        label=label,
        version=version_of("toolkeeper"),
        invoke=invoke,
        check=_succeeded,
    )
    return case, note


async def _block(case: Case, calls: int, tag: str, offset: int) -> Timing:
    ids = [f"{case.key}-{tag}-{i}" for i in range(calls)]
    arguments = [json.dumps({"a": i, "b": offset}) for i in range(calls)]
    invoke = case.invoke
    check = case.check

    def call(i: int) -> Any:
        return invoke(ids[i], arguments[i])

    return await time_async_calls(call, calls, check=lambda i, r: check(r, i + offset))


RATIO_TARGETS = {MEMORY: 1.3, SQLITE: 4.0, SQLITE_WRITE: 12.0}
"""The most each case may take, as a multiple of openai-agents' `on_invoke_tool` measured in
the same run (the paired ratio: repeat by repeat, at the same machine speed)."""


def _targets(cases: dict[str, CaseReport]) -> tuple[Target, ...]:
    def median(key: str) -> float | None:
        case = cases.get(key)
        return case.summary.median_us if case is not None and case.summary else None

    def paired(key: str, versus: str = "openai_agents") -> float | None:
        own, peer = cases.get(key), cases.get(versus)
        if own is None or own.summary is None or peer is None or peer.summary is None:
            return None
        return paired_ratio(own.summary, peer.summary)

    def target(
        key: str, description: str, measured: float | None, limit: float, unit: str
    ) -> Target:
        met = None if measured is None else measured <= limit
        return Target(
            key=key, description=description, measured=measured, limit=limit, unit=unit, met=met
        )

    names = {MEMORY: "(a) read_only, memory ledger", SQLITE: "(b) read_only, SQLite ledger"}
    names[SQLITE_WRITE] = "(c) write, SQLite ledger"
    letters = {MEMORY: "a", SQLITE: "b", SQLITE_WRITE: "c"}
    bounds = {MEMORY: 20.0, SQLITE: 150.0, SQLITE_WRITE: 300.0}
    out: list[Target] = []
    for key, name in names.items():
        out.append(
            target(
                f"{letters[key]}_median",
                f"{name}: median <= {bounds[key]:g} us",
                median(key),
                bounds[key],
                "us",
            )
        )
        limit = RATIO_TARGETS[key]
        out.append(
            target(
                f"{letters[key]}_vs_openai_agents",
                f"{name}: <= {limit:g}x openai-agents, paired in the same run",
                paired(key),
                limit,
                "x",
            )
        )
    out.append(
        target(
            "a_otel_vs_a",
            f"{OTEL_LABEL}: <= {OTEL_TARGET:g}x (a) off, paired in the same run",
            paired(MEMORY_OTEL, MEMORY),
            OTEL_TARGET,
            "x",
        )
    )
    return tuple(out)


def _environment() -> dict[str, Any]:
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        load = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": load,
        "toolkeeper": version_of("toolkeeper"),
    }


async def run_executor_bench(
    *,
    calls: int = DEFAULT_CALLS,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    directory: str | os.PathLike[str] | None = None,
    peers: Sequence[Peer] = PEERS,
    progress: Callable[[str], None] | None = None,
) -> ExecutorBench:
    """Measure every case in this process and return the report.

    Args:
        calls: Timed calls per case and repeat.
        repeats: How often every case is measured, interleaved with the others.
        warmup: Untimed calls per case first (at least one: it proves the case works).
        directory: Where the SQLite ledgers go, made if missing (default: a temporary
            directory, removed after).
            Call ids are new on every run, so an existing ledger there never replays.
        peers: The frameworks to compare with; a missing one is reported, not fatal.
        progress: Called with a short line as each phase starts.

    Raises:
        ValueError: `calls` or `repeats` is below 1.
    """
    if calls < 1 or repeats < 1:
        raise ValueError("calls and repeats must be at least 1")
    say = progress or (lambda _line: None)
    environment = _environment()
    run = uuid.uuid4().hex[:8]
    reports: dict[str, CaseReport] = {}
    async with AsyncExitStack() as stack:
        if directory is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="tk-bench-"))
        await anyio.Path(directory).mkdir(parents=True, exist_ok=True)  # (a ledger needs it)
        cases, notes = await _own_cases(stack, Path(directory))
        for peer in peers:
            built = await _peer_case(peer)
            if isinstance(built, Case):
                cases.append(built)
            else:
                reports[peer.key] = built
        working: list[Case] = []
        for case in cases:
            say(f"warming up {case.label}")
            failed = await _warm_up(case, max(warmup, 1), run)
            if failed is None:
                working.append(case)
            else:
                reports[case.key] = failed
        say(f"measuring {len(working)} cases: {calls} calls x {repeats} repeats")
        timings = await interleave_async(
            [(c.key, _repeat_block(c, calls, run)) for c in working], repeats
        )
        for case in working:
            reports[case.key] = CaseReport(
                key=case.key,
                label=case.label,
                status="ok",
                version=case.version,
                note=notes.get(case.key),
                summary=Summary.of(timings[case.key]),
            )
    environment["load_average_after"] = _environment()["load_average"]
    if MEMORY_OTEL not in reports and MEMORY_OTEL in notes:
        reports[MEMORY_OTEL] = CaseReport(
            key=MEMORY_OTEL, label=OTEL_LABEL, status="not installed", note=notes[MEMORY_OTEL]
        )
    order = [MEMORY, MEMORY_OTEL, SQLITE, SQLITE_WRITE, *(p.key for p in peers)]
    return ExecutorBench(
        calls=calls,
        repeats=repeats,
        warmup=warmup,
        cases=tuple(reports[k] for k in order if k in reports),
        targets=_targets(reports),
        environment=environment,
    )


async def _own_cases(stack: AsyncExitStack, root: Path) -> tuple[list[Case], dict[str, str]]:
    cases: list[Case] = []
    notes: dict[str, str] = {}
    for key, label, ledger, effect in (
        (MEMORY, "(a) toolkeeper read_only, memory ledger", "memory://", Effect.READ_ONLY),
        (
            SQLITE,
            "(b) toolkeeper read_only, SQLite ledger",
            f"sqlite:///{root / 'bench-read.db'}",
            Effect.READ_ONLY,
        ),
        (
            SQLITE_WRITE,
            "(c) toolkeeper write, SQLite ledger",
            f"sqlite:///{root / 'bench-write.db'}",
            Effect.WRITE,
        ),
    ):
        case, notes[key] = await _toolkeeper_case(stack, key, label, ledger, effect)
        cases.append(case)
    telemetry = _sdk_telemetry()
    if isinstance(telemetry, str):
        notes[MEMORY_OTEL] = telemetry
    else:
        case, notes[MEMORY_OTEL] = await _toolkeeper_case(
            stack, MEMORY_OTEL, OTEL_LABEL, "memory://", Effect.READ_ONLY, telemetry
        )
        cases.append(case)
    return cases, notes


def _sdk_telemetry() -> Telemetry | str:
    """OpenTelemetry on the SDK, every span processed (`SimpleSpanProcessor`) and dropped by
    its exporter, metrics kept by a reader never collected; or why it is unavailable."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            SimpleSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        from ..observe.otel import OpenTelemetry
    except ImportError:
        return 'not installed: pip install "toolkeeper[otel]"'

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(Dropping()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)


async def _peer_case(peer: Peer) -> Case | CaseReport:
    """The peer's case, or the report of why it cannot be measured."""
    try:
        return await peer.build(add)
    except PeerUnavailable as exc:
        return CaseReport(key=peer.key, label=peer.name, status="not installed", note=exc.reason)
    except Exception as exc:
        return CaseReport(
            key=peer.key,
            label=peer.name,
            status="error",
            version=version_of(peer.distribution),
            note=f"could not build the tool: {type(exc).__name__}: {exc}",
        )


async def _warm_up(case: Case, calls: int, run: str) -> CaseReport | None:
    """None when every warm-up call returned the right result, else the error report."""
    try:
        warm = await _block(case, calls, f"{run}-warmup", 0)
    except Exception as exc:
        note = f"a call raised {type(exc).__name__}: {exc}"
    else:
        if not warm.failures:
            return None
        note = f"{warm.failures} of {calls} warm-up calls returned a wrong result"
    return CaseReport(
        key=case.key, label=case.label, status="error", version=case.version, note=note
    )


def _repeat_block(case: Case, calls: int, run: str) -> Callable[[int], Any]:
    async def block(repeat: int) -> Timing:
        return await _block(case, calls, f"{run}-r{repeat}", repeat)

    return block


def bench_executor(**options: Any) -> ExecutorBench:
    """`run_executor_bench` from synchronous code (its own event loop, asyncio backend)."""

    async def main() -> ExecutorBench:
        return await run_executor_bench(**options)

    return anyio.run(main)
