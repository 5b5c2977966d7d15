"""Call budgets hold exactly across processes: 12 keepers in 4 processes share one ledger (a
SQLite file, or PostgreSQL), propose calls of one task at the same moment, and exactly as many
run as the budget allows, in every trial; the others are refused BUDGET_EXCEEDED.

The module is also the child process: `python -m tests.policy.test_budgets_across_processes
INDEX` reads one JSON trial per line on stdin, opens its keepers, prints `ready`, waits for
`go`, proposes its calls at once and prints their outcomes as one JSON line.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from toolkeeper import Budgets, Keeper, ToolCall
from toolkeeper.ledger import LedgerStore, open_store

from ..conftest import APP, postgres_url

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
KEEPERS_PER_PROCESS = 3
TOOLS = ("append", "lookup")
"""A write tool and a read-only tool; each run of either appends one line to the effects."""
CALLS_PER_TOOL = 3
"""Calls each keeper proposes of each tool."""
CALLS = PROCESSES * KEEPERS_PER_PROCESS * len(TOOLS) * CALLS_PER_TOOL
"""Calls proposed in one trial, all of one task: 72."""
TRIALS = 3


def _store(ledger: str, schema: str | None) -> LedgerStore:
    if schema is None:
        return open_store(ledger)
    from toolkeeper.ledger import PostgresStore

    return PostgresStore(ledger, schema=schema)


def _keeper(trial: dict[str, Any]) -> Keeper:
    keeper = Keeper(
        principal=APP,
        ledger=_store(trial["ledger"], trial["schema"]),
        budgets=Budgets(**trial["budgets"]),
    )
    effects = trial["effects"]

    def record(tool: str, call_id: str) -> None:
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{tool} {call_id}\n".encode())
        finally:
            os.close(fd)

    @keeper.tool(effect="write")
    async def append(call_id: str) -> str:
        """Append a line (the effect this test counts)."""
        record("append", call_id)
        return call_id

    @keeper.tool(effect="read_only")
    async def lookup(call_id: str) -> str:
        """Look something up (and leave a line, so the test can count it)."""
        record("lookup", call_id)
        return call_id

    return keeper


async def _propose(index: int, trial: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """One trial in a child: its keepers open, `ready`, then on `go` every call at once."""
    outcomes: list[tuple[str, str, str, str | None]] = []

    async def propose(keeper: Keeper, call: ToolCall) -> None:
        result = await keeper.execute(call)
        code = result.error.code.value if result.error is not None else None
        outcomes.append((call.call_id, call.name, result.status.value, code))

    async with AsyncExitStack() as stack:
        keepers = [
            await stack.enter_async_context(_keeper(trial)) for _ in range(KEEPERS_PER_PROCESS)
        ]
        print("ready", flush=True)
        assert (await anyio.to_thread.run_sync(sys.stdin.readline)).strip() == "go"
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for k, keeper in enumerate(keepers):
                    for tool in TOOLS:
                        for i in range(CALLS_PER_TOOL):
                            call_id = f"p{index}-k{k}-{tool}-{i}"
                            call = ToolCall(
                                call_id=call_id,
                                task_id=trial["task"],
                                name=tool,
                                arguments={"call_id": call_id},
                            )
                            tg.start_soon(propose, keeper, call)
    return outcomes


async def _child(index: int) -> None:
    while line := await anyio.to_thread.run_sync(sys.stdin.readline):
        print(json.dumps(await _propose(index, json.loads(line))), flush=True)


@contextmanager
def _children() -> Iterator[list[subprocess.Popen[str]]]:
    """The child processes, each running this module; they must end well once told no more."""
    with ExitStack() as stack:
        children = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-m", __name__, str(index)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                )
            )
            for index in range(PROCESSES)
        ]
        try:
            yield children
            for child in children:
                assert child.stdin is not None
                child.stdin.close()
            for child in children:
                assert child.wait(timeout=30) == 0
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()


def _tell(children: list[subprocess.Popen[str]], line: str) -> None:
    for child in children:
        assert child.stdin is not None
        child.stdin.write(line + "\n")
        child.stdin.flush()


def _hear(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"child {child.pid} ended (exit code {child.wait(timeout=30)})"
    return line.strip()


@dataclass(frozen=True, kw_only=True)
class Trial:
    """What happened in one trial."""

    ran: dict[str, int]
    """Effects counted, by tool."""
    refused: dict[str | None, int]
    """The calls that did not succeed, by error code."""


def _trial(children: list[subprocess.Popen[str]], spec: dict[str, Any]) -> Trial:
    effects = Path(spec["effects"])
    effects.touch()
    _tell(children, json.dumps(spec))
    assert [_hear(child) for child in children] == ["ready"] * len(children)
    _tell(children, "go")  # every child waits for this line with its keepers open
    outcomes = [tuple(o) for child in children for o in json.loads(_hear(child))]
    assert len(outcomes) == CALLS
    lines = [tuple(line.split()) for line in effects.read_text().splitlines()]
    ok = [(tool, call_id) for call_id, tool, status, _ in outcomes if status == "SUCCEEDED"]
    assert sorted(lines) == sorted(ok)  # each effect is one succeeded call's, none twice
    return Trial(
        ran=dict(Counter(tool for tool, _ in lines)),
        refused=dict(Counter(code for *_, status, code in outcomes if status != "SUCCEEDED")),
    )


async def _migrate(ledger: str, schema: str | None) -> None:
    # Before the keepers open: they test budgets, not twelve first migrations at once.
    async with _store(ledger, schema):
        pass


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], dict[str, Any]]:
    """Makes the ledger of one trial: a new SQLite file, or a new task on PostgreSQL (in a
    schema of the test's own, dropped afterwards)."""
    schema = request.getfixturevalue("pg_schema") if request.param == "postgres" else None
    trials = itertools.count()

    def fresh() -> dict[str, Any]:
        n = next(trials)
        ledger = postgres_url() if schema else f"sqlite:///{tmp_path / f'ledger-{n}.db'}"
        anyio.run(_migrate, ledger, schema)
        return {
            "ledger": ledger,
            "schema": schema,
            "task": f"budget-{uuid.uuid4().hex[:12]}",
            "effects": str(tmp_path / f"effects-{n}.txt"),
        }

    return fresh


CASES: dict[str, tuple[dict[str, int], Callable[[Trial], object], object]] = {
    "per_task": ({"max_calls_per_task": 5}, lambda t: sum(t.ran.values()), 5),
    "per_tool": ({"max_calls_per_tool_per_task": 2}, lambda t: t.ran, {"append": 2, "lookup": 2}),
}
"""A case's budgets, what a trial's effects are measured by, and what that must be."""


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_keepers_in_four_processes_run_exactly_the_calls_the_budget_allows(
    ledgers: Callable[[], dict[str, Any]], case: str
) -> None:
    budgets, measure, expected = CASES[case]
    with _children() as children:
        trials = [_trial(children, {**ledgers(), "budgets": budgets}) for _ in range(TRIALS)]
    assert [measure(t) for t in trials] == [expected] * TRIALS
    assert all(set(t.refused) == {"BUDGET_EXCEEDED"} for t in trials), trials


if __name__ == "__main__":
    anyio.run(_child, int(sys.argv[1]))
