"""Pause and resume across keepers on one durable ledger (as across processes), attacked:
concurrent resumes, another principal, an unknown run, a run id used twice."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from toolkeeper import Keeper, Principal
from toolkeeper.agent import Agent, RunResult, RunStatus
from toolkeeper.core.errors import ConfigurationError, ErrorCode
from toolkeeper.ledger import LedgerStore, PostgresStore, SQLiteStore, StaleRun
from toolkeeper.testing import ScriptedModel, scripted_call

from ..conftest import postgres_url

pytestmark = pytest.mark.anyio

ALICE = Principal(id="alice", grants=frozenset({"*"}))


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            [scripted_call("search", query="tides"), scripted_call("publish", title="Tides")],
            "Published.",
        ]
    )


def make(store: LedgerStore, log: list[str]) -> tuple[Keeper, Agent]:
    keeper = Keeper(ledger=store)

    @keeper.tool(effect="read_only")
    def search(query: str) -> str:
        """Search."""
        log.append(f"search {query}")
        return "found"

    @keeper.tool(effect="destructive")
    def publish(title: str) -> str:
        """Publish."""
        log.append(f"publish {title}")
        return "live"

    return keeper, Agent(keeper, script())


async def pause(store: LedgerStore, log: list[str]) -> RunResult:
    keeper, agent = make(store, log)
    async with keeper:
        paused = await agent.run("go", principal=ALICE, task_id="run-1")
        await keeper.approvals.approve(paused.approvals[0], by="bob")
    return paused


async def test_a_run_resumed_by_another_keeper_runs_the_approved_call_once(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    paused = await pause(SQLiteStore(tmp_path / "l.db"), log)
    assert paused.status is RunStatus.AWAITING_APPROVAL and log == ["search tides"]
    for _ in range(2):
        keeper, agent = make(SQLiteStore(tmp_path / "l.db"), log)
        async with keeper:
            done = await agent.resume("run-1")
        assert done.status is RunStatus.COMPLETED and done.output == "Published."
        assert [o.result.status.value for o in done.calls] == ["SUCCEEDED", "SUCCEEDED"]
    assert log == ["search tides", "publish Tides"]


async def test_of_two_concurrent_resumes_one_goes_on_and_nothing_runs_twice(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    await pause(SQLiteStore(tmp_path / "l.db"), log)
    outcomes: list[object] = []

    async def resume() -> None:
        keeper, agent = make(SQLiteStore(tmp_path / "l.db"), log)
        async with keeper:
            try:
                outcomes.append((await agent.resume("run-1")).status)
            except StaleRun:
                outcomes.append("stale")

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(resume)
    assert log.count("publish Tides") == 1 and log.count("search tides") == 1
    assert RunStatus.COMPLETED in outcomes


async def test_a_run_acts_only_for_its_principal_and_unknown_runs_are_refused(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    await pause(SQLiteStore(tmp_path / "l.db"), log)
    keeper, agent = make(SQLiteStore(tmp_path / "l.db"), log)
    async with keeper:
        with pytest.raises(ConfigurationError):
            await agent.resume("run-1", principal=Principal(id="mallory", grants={"*"}))
        with pytest.raises(KeyError):
            await agent.resume("no-such-run")
        with pytest.raises(ConfigurationError):
            await agent.run("again", principal=ALICE, task_id="run-1")
    assert log == ["search tides"]


async def test_malformed_arguments_go_back_to_the_model_coded_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    keeper, _ = make(SQLiteStore(tmp_path / "l.db"), log)
    model = ScriptedModel([scripted_call("search", query=["not", "text"]), "sorry"])
    model.turns[0] = type(model.turns[0])(name="search", arguments='{"query": ')
    async with keeper:
        result = await Agent(keeper, model).run("x", principal=ALICE)
    assert result.status is RunStatus.COMPLETED
    error = result.calls[0].result.error
    assert error is not None and error.code is ErrorCode.INVALID_ARGUMENTS
    assert result.verdicts.protocol is False and log == []


@pytest.mark.postgres
async def test_a_run_paused_on_postgresql_resumes_from_another_store(pg_schema: str) -> None:
    log: list[str] = []
    await pause(PostgresStore(postgres_url(), schema=pg_schema), log)
    keeper, agent = make(PostgresStore(postgres_url(), schema=pg_schema), log)
    async with keeper:
        done = await agent.resume("run-1")
    assert done.status is RunStatus.COMPLETED
    assert log == ["search tides", "publish Tides"]
