"""Promise 3: no side effect is repeated by a retry, a replay or a restart, on every path.

An attacker (or a flaky network) proposes the same write again and again, at once, after it
ended with an unknown outcome, and after the process running it was killed. Effects are
counted in the file the tool writes, not in what toolkeeper reports.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from toolkeeper import CallStatus, ErrorCode, Keeper, ToolCall
from toolkeeper.server import Deployment

from ..conftest import postgres_url
from ..server.conftest import upstreams_back
from .conftest import (
    CLI,
    TOKENS,
    TRANSPORTS,
    ClientFactory,
    code_of,
    gateway_client,
    stdio_params,
)
from .crash_child import ledger_of, proposal
from .tools import MALLORY, effects, register

pytestmark = pytest.mark.anyio

CHILD = Path(__file__).with_name("crash_child.py")


async def test_ten_concurrent_identical_library_calls_make_one_effect(
    keeper: Keeper, effect_file: Path
) -> None:
    call = ToolCall(
        call_id="w1",
        name="adv.append",
        arguments={"path": str(effect_file), "line": "x"},
        principal=MALLORY,
    )
    async with keeper:
        results: list[CallStatus] = []

        async def one() -> None:
            results.append((await keeper.execute(call)).status)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(one)
        many = await keeper.execute_many([call] * 5)
    assert effects(effect_file) == ["x"]
    assert CallStatus.SUCCEEDED in results
    assert all(r.status is not CallStatus.RUNNING for r in many)


@pytest.mark.parametrize("exposure", ["direct", "progressive"])
async def test_ten_concurrent_identical_writes_over_http_make_one_effect(
    http_client: ClientFactory, tmp_path: Path, exposure: str
) -> None:
    target = tmp_path / "slow.txt"
    args = {"path": str(target), "line": "once"}
    name, arguments = "t.slow_append", args
    if exposure == "progressive":
        name, arguments = "call_tool", {"name": "t.slow_append", "arguments": args}
    token = TOKENS["mallory" if exposure == "direct" else "prog"]
    async with http_client(token) as client:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(client.call_tool, name, arguments)
    assert effects(target) == ["once"]


async def test_ten_concurrent_identical_writes_over_stdio_make_one_effect(
    config_file: Path, tmp_path: Path
) -> None:
    target = tmp_path / "slow.txt"
    args = {"path": str(target), "line": "once"}
    with anyio.fail_after(90):
        async with Client(stdio_params(config_file)) as mallory, anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(mallory.call_tool, "t.slow_append", args)
    assert effects(target) == ["once"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_write_with_an_unknown_outcome_is_not_run_again_by_the_same_proposal(
    tmp_path: Path, transport: str
) -> None:
    """The upstream dies mid-write; the client proposes the same write again."""
    marker = tmp_path / "marker.txt"
    async with gateway_client(transport, tmp_path, "mallory") as mallory:
        first = await mallory.call_tool("t.die_midway", {"path": str(marker)})
        again = await mallory.call_tool("t.die_midway", {"path": str(marker)})
    assert code_of(first) == "UNKNOWN_OUTCOME"
    assert code_of(again) == "UNKNOWN_OUTCOME"
    assert effects(marker) == ["started"]


async def test_a_write_settled_as_not_done_runs_once_when_proposed_again_at_once(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    """After `ledger settle --failed`, ten identical proposals at once: the next generation
    runs once (it dies again: the nine others join its unknown outcome, whenever they come)."""
    marker = tmp_path / "marker.txt"
    args = {"path": str(marker)}
    async with http_client(TOKENS["mallory"]) as mallory:
        assert code_of(await mallory.call_tool("t.die_midway", args)) == "UNKNOWN_OUTCOME"
        [record] = await deployment.keeper.store.list_calls()
        settle(tmp_path, record.task_id, record.call_id, "--failed", "--note", "not done")
        await upstreams_back(deployment)
        results = []

        async def one() -> None:
            results.append(await mallory.call_tool("t.die_midway", args))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(one)
    assert [code_of(r) for r in results] == ["UNKNOWN_OUTCOME"] * 10
    assert effects(marker) == ["started", "started"]


def settle(tmp_path: Path, task: str, call: str, *how: str) -> None:
    """`toolkeeper ledger settle` on this test's ledger, as a person runs it."""
    root = Path(__file__).resolve().parents[2]
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    subprocess.run(
        [sys.executable, "-c", CLI, "ledger", "settle", "--ledger", ledger, task, call, *how],
        check=True,
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
    )


def _crash(ledger: str, effect_file: Path, path: str, schema: str | None) -> None:
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, str(CHILD), ledger, str(effect_file), path, *([schema] if schema else [])],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


async def _restart_and_propose_again(
    ledger: str, schema: str | None, effect_file: Path, path: str
) -> None:
    _crash(ledger, effect_file, path, schema)
    assert effects(effect_file) == ["paid"]
    keeper = Keeper(ledger=ledger_of(ledger, schema))
    register(keeper)
    if path == "call_tool":
        keeper.enable_discovery()
    async with keeper:
        call = proposal(path, str(effect_file))
        again = await keeper.execute(call)
        [batch] = await keeper.execute_many([call])
        [unknown] = await keeper.unknown()
    assert again.error is not None and again.error.code is ErrorCode.UNKNOWN_OUTCOME
    assert batch.error is not None and batch.error.code is ErrorCode.UNKNOWN_OUTCOME
    assert unknown.call_id == "pay-1"
    assert effects(effect_file) == ["paid"]


@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
async def test_a_write_killed_mid_call_is_not_run_again_after_a_restart(
    tmp_path: Path, effect_file: Path, path: str
) -> None:
    await _restart_and_propose_again(f"sqlite:///{tmp_path / 'ledger.db'}", None, effect_file, path)


@pytest.mark.postgres
async def test_a_write_killed_mid_call_is_not_run_again_after_a_restart_on_postgresql(
    pg_schema: str, effect_file: Path
) -> None:
    await _restart_and_propose_again(postgres_url(), pg_schema, effect_file, "execute")


async def test_a_gateway_killed_mid_write_does_not_run_it_again_when_restarted(
    config_file: Path, effect_file: Path
) -> None:
    """The gateway process itself dies (SIGKILL, from inside the tool) between the effect and
    its record; a plain client proposes the same write to the restarted gateway."""
    args = {"path": str(effect_file), "line": "paid"}
    with anyio.fail_after(60):
        try:
            async with Client(stdio_params(config_file)) as first:
                await first.call_tool("adv.crash_write", args)
        except Exception:
            pass
        assert effects(effect_file) == ["paid"]
        async with Client(stdio_params(config_file)) as second:
            again = await second.call_tool("adv.crash_write", args)
    assert code_of(again) == "UNKNOWN_OUTCOME"
    assert effects(effect_file) == ["paid"]


@pytest.mark.parametrize("ledger", ["sqlite", "postgresql"])
async def test_a_gateway_killed_mid_write_is_answered_by_another_without_running_it_again(
    config_file: Path, effect_file: Path, ledger: str, request: pytest.FixtureRequest
) -> None:
    """Two gateway processes share a ledger; one dies (SIGKILL, from inside the tool) between
    the effect and its record. The other, open all along, is proposed the same write by a
    plain client (no call id: the id is derived in the ledger, as both gateways derive it)."""
    params = stdio_params(config_file)
    if ledger == "postgresql":
        import psycopg

        schema = request.getfixturevalue("pg_schema")
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        url = f"{postgres_url()}?options=-csearch_path%3D{schema}"
        key = {"TOOLKEEPER_DIGEST_KEY": os.environ["TOOLKEEPER_DIGEST_KEY"]}
        params = params.model_copy(
            update={"args": [*params.args, "--ledger", url], "env": {**(params.env or {}), **key}}
        )
    args = {"path": str(effect_file), "line": "paid"}
    with anyio.fail_after(60):
        async with Client(params) as survivor:
            await survivor.list_tools()  # (open, its ledger opened and recovered)
            try:
                async with Client(params) as doomed:
                    await doomed.call_tool("adv.crash_write", args)
            except Exception:
                pass
            assert effects(effect_file) == ["paid"]
            again = await survivor.call_tool("adv.crash_write", args)
            twice = await survivor.call_tool("adv.crash_write", args)
    assert code_of(again) == code_of(twice) == "UNKNOWN_OUTCOME"
    assert effects(effect_file) == ["paid"]
    if ledger == "postgresql":  # (the record is in the PostgreSQL ledger both gateways used)
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            rows = admin.execute(f"SELECT tool, status FROM {schema}.calls").fetchall()
        assert rows == [("adv.crash_write", "UNKNOWN_OUTCOME")]
