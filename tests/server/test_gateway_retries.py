"""A plain client's retries through the gateway (no `dev.toolkeeper/call-id`): proposals made
while the same call is open join it, a write of unknown outcome is not run again until it is
settled, and what each proposal gets back, over streamable HTTP and stdio, with the official
client and the test upstream."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from toolkeeper.config import parse_config
from toolkeeper.core import CallStatus
from toolkeeper.server import Deployment, build
from toolkeeper.server.call_ids import REPEAT_WINDOW
from toolkeeper.server.gateway import Gateway

from .conftest import TOKENS, ClientFactory, config_text, connected, serving, upstreams_back
from .test_gateway import code_of
from .test_stdio_calls import calls_in
from .test_transports import CLI, stdio_server

pytestmark = pytest.mark.anyio

WRITE = "t.append_when_released"
CALL_ID = "dev.toolkeeper/call-id"
REPLAYED = "dev.toolkeeper/replayed"


@contextmanager
def gate(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """A FIFO the upstream's `append_when_released` waits on; calling what this yields lets
    every call waiting on it (and any later one) answer."""
    path = tmp_path / "gate"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)  # (held open: the upstream's open never waits for a writer)
    try:
        yield lambda: os.write(fd, b"x" * 64) and None
    finally:
        os.close(fd)


def arrivals(monkeypatch: Any, gateways: list[Gateway], count: int) -> anyio.Event:
    """An event set once `count` tools/call requests reached these gateways in all. (From
    there to reading the ledger for its call id, a request does not wait.)"""
    arrived = anyio.Event()
    seen = [0]
    for gateway in gateways:

        async def answer(*args: Any, _answer: Any = gateway.answer) -> Any:
            seen[0] += 1
            if seen[0] == count:
                arrived.set()
            return await _answer(*args)

        monkeypatch.setattr(gateway, "answer", answer)
    return arrived


def write_args(tmp_path: Path) -> dict[str, str]:
    return {"path": str(tmp_path / "effects.txt"), "line": "x", "gate": str(tmp_path / "gate")}


async def ten_at_once(
    calls: Callable[[int], Awaitable[mcp_types.CallToolResult]],
    all_in: Callable[[], Awaitable[None]],
) -> list[mcp_types.CallToolResult]:
    """Make 10 proposals at once; `all_in` returns once the gateway holds them all."""
    results: list[mcp_types.CallToolResult] = []

    async def one(i: int) -> None:
        results.append(await calls(i))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(one, i)
            await all_in()
    return results


def assert_one_effect_and_ten_answers(tmp_path: Path, results: list[Any]) -> None:
    assert (tmp_path / "effects.txt").read_text() == "x\n"
    assert len(results) == 10
    assert not any(r.is_error for r in results), [r for r in results if r.is_error]
    assert len({r.model_dump_json(exclude={"meta"}) for r in results}) == 1
    # One ran, nine are its replays, and each says which it is, and of which call.
    assert sorted(meta_of(r)[REPLAYED] for r in results) == [False] + [True] * 9
    assert len({meta_of(r)[CALL_ID] for r in results}) == 1


async def assert_one_run(tmp_path: Path, results: list[Any]) -> None:
    """One effect, ten answers, and one call in the ledger, which succeeded."""
    assert_one_effect_and_ten_answers(tmp_path, results)
    assert [r.status for r in await calls_in(tmp_path)] == [CallStatus.SUCCEEDED]


def meta_of(result: mcp_types.CallToolResult) -> dict[str, Any]:
    return dict(result.meta or {})


async def test_ten_identical_writes_at_once_over_http_run_once_and_each_gets_the_result(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path, monkeypatch: Any
) -> None:
    arrived = arrivals(monkeypatch, [deployment.gateway], 10)
    with gate(tmp_path) as release:

        async def all_in() -> None:
            await arrived.wait()
            release()

        async with http_client(TOKENS["alice"]) as alice:
            results = await ten_at_once(
                lambda _i: alice.call_tool(WRITE, write_args(tmp_path)), all_in
            )
    assert_one_effect_and_ten_answers(tmp_path, results)
    [record] = await deployment.keeper.store.list_calls()
    assert record.status is CallStatus.SUCCEEDED


async def test_ten_identical_writes_at_once_over_stdio_run_once_and_each_gets_the_result(
    config_file: Path, tmp_path: Path
) -> None:
    with gate(tmp_path) as release:
        async with Client(stdio_server(config_file)) as alice:

            async def all_in() -> None:
                await anyio.wait_all_tasks_blocked()  # every request written...
                await alice.list_tools(cache_mode="bypass")  # ...and read by the gateway
                release()

            results = await ten_at_once(
                lambda _i: alice.call_tool(WRITE, write_args(tmp_path)), all_in
            )
    assert_one_effect_and_ten_answers(tmp_path, results)
    assert [r.status for r in await calls_in(tmp_path)] == [CallStatus.SUCCEEDED]


@asynccontextmanager
async def http_gateway(deployment: Deployment) -> AsyncIterator[Client]:
    """Alice's official client on `deployment` served over streamable HTTP."""
    async with serving(deployment) as url, connected(url, TOKENS["alice"]) as client:
        yield client


async def test_identical_writes_at_once_through_two_gateways_on_one_ledger_run_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    config = parse_config(config_text(tmp_path), file="test.toml", base_dir=str(tmp_path))
    with gate(tmp_path) as release:
        async with (
            build(config) as first,
            build(config) as second,
            http_gateway(first) as one,
            http_gateway(second) as two,
        ):

            async def all_in() -> None:
                await anyio.wait_all_tasks_blocked()
                release()

            results = await ten_at_once(
                lambda i: (one if i % 2 else two).call_tool(WRITE, write_args(tmp_path)), all_in
            )
    await assert_one_run(tmp_path, results)


async def test_identical_writes_at_once_through_two_stdio_gateway_processes_run_once(
    config_file: Path, tmp_path: Path
) -> None:
    with gate(tmp_path) as release:
        async with (
            Client(stdio_server(config_file)) as one,
            Client(stdio_server(config_file)) as two,
        ):

            async def all_in() -> None:
                await anyio.wait_all_tasks_blocked()
                for client in (one, two):  # (each gateway has read its requests)
                    await client.list_tools(cache_mode="bypass")
                release()

            results = await ten_at_once(
                lambda i: (one if i % 2 else two).call_tool(WRITE, write_args(tmp_path)), all_in
            )
    await assert_one_run(tmp_path, results)


async def test_a_write_proposed_again_after_it_ended_runs_again(
    http_client: ClientFactory, tmp_path: Path
) -> None:
    with gate(tmp_path) as release:
        release()
        async with http_client(TOKENS["alice"]) as alice:
            for _ in range(3):
                assert not (await alice.call_tool(WRITE, write_args(tmp_path))).is_error
    assert (tmp_path / "effects.txt").read_text() == "x\nx\nx\n"


async def test_every_result_names_its_call_and_says_whether_it_is_a_replay(
    http_client: ClientFactory, tmp_path: Path
) -> None:
    given = {CALL_ID: "client-chosen-1"}
    async with http_client(TOKENS["alice"]) as alice:
        read = await alice.call_tool("t.echo", {"text": "a"})
        ran = await alice.call_tool("t.echo", {"text": "b"}, meta=given)
        replayed = await alice.call_tool("t.echo", {"text": "b"}, meta=given)
        refused = await alice.call_tool("t.echo", {"text": 7})
        pending = await alice.call_tool("demo.clear_notes", {})
    assert meta_of(read)[CALL_ID].startswith("mcp-") and meta_of(read)[REPLAYED] is False
    assert (meta_of(ran)[CALL_ID], meta_of(ran)[REPLAYED]) == ("client-chosen-1", False)
    assert (meta_of(replayed)[CALL_ID], meta_of(replayed)[REPLAYED]) == ("client-chosen-1", True)
    assert replayed.structured_content == ran.structured_content
    for error in (refused, pending):
        assert error.is_error and meta_of(error)[REPLAYED] is False
        assert meta_of(error)[CALL_ID].startswith("mcp-")


def settle(tmp_path: Path, task: str, call: str, *how: str) -> None:
    ledger = f"sqlite:///{tmp_path}/ledger.db"
    subprocess.run(
        [sys.executable, "-c", CLI, "ledger", "settle", "--ledger", ledger, task, call, *how],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")},
    )


async def test_a_write_of_unknown_outcome_is_answered_again_until_settled_not_run_again(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    args = {"path": str(marker)}
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("t.die_midway", args)
        assert code_of(first) == "UNKNOWN_OUTCOME"
        again = [await alice.call_tool("t.die_midway", args) for _ in range(3)]
        assert [code_of(r) for r in again] == ["UNKNOWN_OUTCOME"] * 3
        assert meta_of(first)[REPLAYED] is False
        assert [meta_of(r)[REPLAYED] for r in again] == [True] * 3
        assert {meta_of(r)[CALL_ID] for r in [first, *again]} == {meta_of(first)[CALL_ID]}
        assert marker.read_text() == "started\n"  # never sent again
        [record] = await deployment.keeper.store.list_calls()
        settle(tmp_path, record.task_id, record.call_id, "--failed", "--note", "checked")
        # Found not to have taken effect: the next proposal is a new call, which runs.
        await upstreams_back(deployment)
        rerun = await alice.call_tool("t.die_midway", args)
    assert code_of(rerun) == "UNKNOWN_OUTCOME"
    assert marker.read_text() == "started\nstarted\n"
    statuses = sorted(r.status for r in await deployment.keeper.store.list_calls())
    assert statuses == [CallStatus.FAILED, CallStatus.UNKNOWN_OUTCOME]


async def test_a_write_settled_as_done_is_answered_with_what_was_found_then_runs_anew(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    args = {"path": str(marker)}
    async with http_client(TOKENS["alice"]) as alice:
        assert code_of(await alice.call_tool("t.die_midway", args)) == "UNKNOWN_OUTCOME"
        [record] = await deployment.keeper.store.list_calls()
        found = '{"result": "done, by hand"}'
        settle(
            tmp_path,
            record.task_id,
            record.call_id,
            "--succeeded",
            "--note",
            "n",
            "--result",
            found,
        )
        settled = await alice.call_tool("t.die_midway", args)
        assert not settled.is_error, settled
        assert settled.structured_content == {"result": "done, by hand"}
        assert marker.read_text() == "started\n"
        # Its outcome answered, the same proposal again is a new call.
        await upstreams_back(deployment)
        assert code_of(await alice.call_tool("t.die_midway", args)) == "UNKNOWN_OUTCOME"
    assert marker.read_text() == "started\nstarted\n"


async def test_a_write_that_timed_out_is_not_run_again_by_the_same_proposal(
    tmp_path: Path,
) -> None:
    text = config_text(tmp_path) + "\n[upstreams.t.tools.append_when_released]\ntimeout = 0.5\n"
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))
    with gate(tmp_path) as release:
        async with build(config) as running, http_gateway(running) as alice:
            with anyio.fail_after(30):
                first = await alice.call_tool(WRITE, write_args(tmp_path))
                assert code_of(first) == "UNKNOWN_OUTCOME"
                release()
                again = await alice.call_tool(WRITE, write_args(tmp_path))
    assert code_of(again) == "UNKNOWN_OUTCOME"
    assert (tmp_path / "effects.txt").read_text() == "x\n"


@pytest.mark.parametrize("found", [None, '{"other": 1}', '"done"'])
async def test_a_settled_call_without_a_result_of_its_schema_is_answered_as_an_error_result(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path, found: str | None
) -> None:
    # die_midway declares an output schema (`{"result": string}`): the official client refuses
    # a success without structured content that matches it.
    args = {"path": str(tmp_path / "marker.txt")}
    async with http_client(TOKENS["alice"]) as alice:
        assert code_of(await alice.call_tool("t.die_midway", args)) == "UNKNOWN_OUTCOME"
        [record] = await deployment.keeper.store.list_calls()
        result = () if found is None else ("--result", found)
        settle(tmp_path, record.task_id, record.call_id, "--succeeded", "--note", "n", *result)
        settled = await alice.call_tool("t.die_midway", args)
    assert settled.is_error
    assert code_of(settled) == "TOOL_ERROR"
    assert meta_of(settled)[REPLAYED] is True
    assert "took effect" in settled.content[0].text  # type: ignore[union-attr]
    [record] = await deployment.keeper.store.list_calls()
    assert record.status is CallStatus.SUCCEEDED  # (the ledger keeps what was found)


async def test_a_write_the_client_gave_up_waiting_for_is_not_run_again_by_its_retry(
    config_file: Path, tmp_path: Path
) -> None:
    with gate(tmp_path), anyio.fail_after(60):
        async with Client(stdio_server(config_file)) as alice:
            with pytest.raises(MCPError):  # (the client cancels the request at its timeout)
                await alice.call_tool(WRITE, write_args(tmp_path), read_timeout_seconds=1.0)
            # Its retry joins the call: once the cancelled one has ended, its unknown outcome.
            again = await alice.call_tool(WRITE, write_args(tmp_path))
    assert code_of(again) == "UNKNOWN_OUTCOME"
    assert meta_of(again)[REPLAYED] is True
    assert (tmp_path / "effects.txt").read_text() == "x\n"
    assert [r.status for r in await calls_in(tmp_path)] == [CallStatus.UNKNOWN_OUTCOME]


@pytest.mark.parametrize("generation", ["²", "9" * 475], ids=["superscript", "longest"])
async def test_a_client_call_id_shaped_like_a_derived_one_is_its_own_call(
    http_client: ClientFactory, generation: str
) -> None:
    """A client's own call id `<derived id>.<generation>` (the derived id read from an earlier
    result's `_meta`) is the client's call: it is answered, and it moves nothing of how the
    gateway derives its ids. (`²` is a digit to `str.isdigit`, not to `int`: the write ran and
    its answer was a traceback; a generation of 475 nines made the derived id of the call's
    next proposal too long for the ledger, which refused it.)"""
    args = {"text": "a"}
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("demo.add_note", args)
        given = {CALL_ID: f"{meta_of(first)[CALL_ID]}.{generation}"}
        own = await alice.call_tool("demo.add_note", args, meta=given)
        plain = await alice.call_tool("demo.add_note", args)
    assert not own.is_error and meta_of(own)[CALL_ID] == given[CALL_ID]
    assert not plain.is_error, plain
    assert meta_of(plain)[CALL_ID] == f"{meta_of(first)[CALL_ID]}.1"


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_ten_identical_fast_writes_at_once_from_several_connections_run_once(
    tmp_path: Path, transport: str
) -> None:
    """With no gate to hold it open, a write ended before the later identical proposals reached
    the gateway, and each of those ran it again (3-5 effects of 10 over HTTP). Within the
    default repeat window they get its result."""
    path = tmp_path / "gw.toml"
    path.write_text(config_text(tmp_path, repeat_window=REPEAT_WINDOW))
    args = {"path": str(tmp_path / "effects.txt"), "line": "x"}
    results: list[mcp_types.CallToolResult] = []

    async def propose(clients: list[Client]) -> None:
        async def one(client: Client) -> None:
            results.append(await client.call_tool("t.append_line", args))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon(one, clients[i % len(clients)])

    async with AsyncExitStack() as stack:
        if transport == "http":
            config = parse_config(path.read_text(), file="gw.toml", base_dir=str(tmp_path))
            running = await stack.enter_async_context(build(config))
            clients = [await stack.enter_async_context(http_gateway(running)) for _ in range(5)]
        else:
            clients = [
                await stack.enter_async_context(Client(stdio_server(path))) for _ in range(2)
            ]
        await propose(clients)
    assert (tmp_path / "effects.txt").read_text() == "x\n"
    assert not any(r.is_error for r in results), [r for r in results if r.is_error]
    assert sorted(meta_of(r)[REPLAYED] for r in results) == [False] + [True] * 9
    assert len({meta_of(r)[CALL_ID] for r in results}) == 1


async def test_a_write_settled_as_done_and_proposed_again_at_once_runs_no_more(
    tmp_path: Path,
) -> None:
    """Once the settled call was answered, a proposal racing that answer was a new call and
    ran the write again; within the repeat window every one of them gets what was found."""
    text = config_text(tmp_path, repeat_window=REPEAT_WINDOW)
    config = parse_config(text, file="gw.toml", base_dir=str(tmp_path))
    marker = tmp_path / "marker.txt"
    args = {"path": str(marker)}
    results: list[mcp_types.CallToolResult] = []
    async with build(config) as running, http_gateway(running) as alice:
        assert code_of(await alice.call_tool("t.die_midway", args)) == "UNKNOWN_OUTCOME"
        [record] = await running.keeper.store.list_calls()
        found = '{"result": "done, by hand"}'
        settle(
            tmp_path,
            record.task_id,
            record.call_id,
            "--succeeded",
            "--note",
            "n",
            "--result",
            found,
        )

        async def one() -> None:
            results.append(await alice.call_tool("t.die_midway", args))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one)
    assert marker.read_text() == "started\n"
    assert [r.structured_content for r in results] == [{"result": "done, by hand"}] * 5
