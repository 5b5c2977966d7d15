"""The MCP upstream connector against real servers: mcp-server-time, mcp-server-git (PyPI) and
a small test server of our own (tests/connectors/upstream_server.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import anyio
import pytest
from mcp import Client, StdioServerParameters

import toolkeeper.connectors.mcp as mcp_connector
from toolkeeper import CallStatus, Keeper, Principal, ToolCall
from toolkeeper.catalog import Catalog, ChangeKind
from toolkeeper.connectors.base import UpstreamUnavailable
from toolkeeper.connectors.mcp import (
    McpUpstream,
    ToolOverride,
    UpstreamParams,
    spec_from_mcp,
)
from toolkeeper.core import ANONYMOUS, CallContext, Effect, OutcomeUnknown, ToolFailed, ToolSpec

from ..conftest import APP

pytestmark = pytest.mark.anyio

UPSTREAM = str(Path(__file__).with_name("upstream_server.py"))


def ctx(spec: ToolSpec, *, key: str = "key-1", timeout: float = 10.0) -> CallContext:
    return CallContext(
        call_id="c1",
        task_id="t1",
        tool=spec.name,
        version=spec.version,
        principal=ANONYMOUS,
        attempt=1,
        deadline=time.monotonic() + timeout,
        idempotency_key=key,
    )


def spec_of(catalog: Catalog, name: str) -> ToolSpec:
    tool = catalog.get(name)
    assert tool is not None, f"{name} not in {[t.name for t in catalog]}"
    return tool.spec


@pytest.fixture
async def test_upstream() -> AsyncIterator[tuple[McpUpstream, Catalog]]:
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,), connect_timeout=60
    )
    async with McpUpstream(params, catalog) as upstream:
        assert upstream.connected
        yield upstream, catalog


async def test_time_server_tools_are_namespaced_with_read_only_hints() -> None:
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True, name="time", command=sys.executable, args=("-m", "mcp_server_time")
    )
    async with McpUpstream(params, catalog) as upstream:
        spec = spec_of(catalog, "time.get_current_time")
        assert spec.source == "time"
        assert spec.effect is Effect.READ_ONLY
        assert spec.permissions == ("time:get_current_time",)
        data = await upstream.invoke(spec, {"timezone": "Europe/Paris"}, ctx(spec))
    assert data["timezone"] == "Europe/Paris"
    assert "time.convert_time" in catalog


async def test_tool_error_result_raises_tool_failed() -> None:
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True, name="time", command=sys.executable, args=("-m", "mcp_server_time")
    )
    async with McpUpstream(params, catalog) as upstream:
        spec = spec_of(catalog, "time.get_current_time")
        with pytest.raises(ToolFailed):
            await upstream.invoke(spec, {"timezone": "Not/AZone"}, ctx(spec))


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "t@example.org"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "T"], check=True)
    (repo / "a.txt").write_text("hello\n")
    return repo


async def test_git_commit_is_a_write_whose_effect_is_read_back(git_repo: Path) -> None:
    repo = git_repo
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True,
        name="git",
        command=sys.executable,
        args=("-m", "mcp_server_git", "--repository", str(repo)),
    )
    async with McpUpstream(params, catalog) as upstream:
        add, commit, log = (spec_of(catalog, f"git.git_{n}") for n in ("add", "commit", "log"))
        assert commit.effect is Effect.WRITE
        assert not commit.idempotent
        assert spec_of(catalog, "git.git_reset").effect is Effect.DESTRUCTIVE
        await upstream.invoke(add, {"repo_path": str(repo), "files": ["a.txt"]}, ctx(add))
        await upstream.invoke(
            commit, {"repo_path": str(repo), "message": "first via mcp"}, ctx(commit)
        )
        history = await upstream.invoke(log, {"repo_path": str(repo)}, ctx(log))
    assert "first via mcp" in str(history)
    out = await anyio.run_process(["git", "-C", str(repo), "log", "--format=%s"])
    assert out.stdout.decode().strip() == "first via mcp"


def test_configuration_overrides_the_servers_hints() -> None:
    import mcp_types

    tool = mcp_types.Tool(
        name="wipe",
        input_schema={"type": "object"},
        annotations=mcp_types.ToolAnnotations(read_only_hint=True),
    )
    hinted = spec_from_mcp(tool, UpstreamParams(name="x", command="x", trust_hints=True))
    assert hinted.effect is Effect.READ_ONLY
    override = ToolOverride(effect=Effect.DESTRUCTIVE, idempotent=False, permissions=("x:admin",))
    trusted = spec_from_mcp(tool, UpstreamParams(name="x", command="x", tools={"wipe": override}))
    assert (trusted.effect, trusted.idempotent, trusted.permissions) == (
        Effect.DESTRUCTIVE,
        False,
        ("x:admin",),
    )


def test_an_untrusted_servers_hints_never_relax_policy() -> None:
    """`readOnlyHint: true` from any server waived approval and allowed retries: a server
    we do not control could call a delete read-only."""
    import mcp_types

    tool = mcp_types.Tool(
        name="wipe",
        input_schema={"type": "object"},
        annotations=mcp_types.ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True
        ),
    )
    untrusted = spec_from_mcp(tool, UpstreamParams(name="x", command="x"))
    assert (untrusted.effect, untrusted.idempotent) == (Effect.DESTRUCTIVE, False)
    assert not untrusted.retry_safe
    trusted = spec_from_mcp(tool, UpstreamParams(name="x", command="x", trust_hints=True))
    assert (trusted.effect, trusted.idempotent) == (Effect.READ_ONLY, True)
    stated = UpstreamParams(
        name="x", command="x", tools={"wipe": ToolOverride(effect=Effect.WRITE)}
    )
    # the operator's fact needs no trust in the server; what it leaves unsaid stays strict
    assert (spec_from_mcp(tool, stated).effect, spec_from_mcp(tool, stated).idempotent) == (
        Effect.WRITE,
        False,
    )


def test_a_tool_without_annotations_is_assumed_destructive() -> None:
    import mcp_types

    tool = mcp_types.Tool(name="anything", input_schema={"type": "object"})
    assert spec_from_mcp(tool, UpstreamParams(name="x", command="x")).effect is Effect.DESTRUCTIVE


async def test_call_passes_the_idempotency_key_in_meta(
    test_upstream: tuple[McpUpstream, Catalog],
) -> None:
    upstream, catalog = test_upstream
    spec = spec_of(catalog, "t.echo")
    data = await upstream.invoke(spec, {"text": "hi"}, ctx(spec, key="tk_abc"))
    assert (data["text"], data["key"]) == ("hi", "tk_abc")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_calls_go_on_the_connectors_own_lane_in_both_protocol_eras(
    mode: Literal["auto", "legacy"],
) -> None:
    # The lane's requests carry string ids of its own; the SDK session numbers its requests.
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,), protocol=mode
    )
    async with McpUpstream(params, catalog) as upstream:
        spec = spec_of(catalog, "t.echo")
        first = await upstream.invoke(spec, {"text": "one"}, ctx(spec, key="k1"))
        second = await upstream.invoke(spec, {"text": "two"}, ctx(spec, key="k2"))
        protocol = upstream.protocol_version
    assert (first["text"], first["key"]) == ("one", "k1")
    assert (second["text"], second["key"]) == ("two", "k2")
    assert first["request_id"].startswith("tk-")
    assert first["request_id"] != second["request_id"]
    assert (protocol == "2026-07-28") == (mode == "auto")


async def test_a_call_abandoned_at_its_deadline_is_cancelled_on_the_upstream(
    test_upstream: tuple[McpUpstream, Catalog], tmp_path: Path
) -> None:
    upstream, catalog = test_upstream
    marker = tmp_path / "hang.txt"
    hang, echo = spec_of(catalog, "t.hang"), spec_of(catalog, "t.echo")
    with anyio.fail_after(5), pytest.raises(TimeoutError):
        await upstream.invoke(hang, {"path": str(marker)}, ctx(hang, timeout=0.3))
    # The cancellation went first on the same pipe: by the time a later call is answered,
    # the server has cancelled the abandoned one.
    await upstream.invoke(echo, {"text": "after"}, ctx(echo))
    assert marker.read_text() == "cancelled\n"


async def test_list_changed_notification_adds_the_new_tool(
    test_upstream: tuple[McpUpstream, Catalog],
) -> None:
    upstream, catalog = test_upstream
    added = anyio.Event()
    catalog.subscribe(
        lambda e: added.set() if e.kind is ChangeKind.ADDED and e.tool.name == "t.newbie" else None
    )
    spec = spec_of(catalog, "t.add_tool")
    await upstream.invoke(spec, {"name": "newbie"}, ctx(spec))
    with anyio.fail_after(10):
        await added.wait()
    assert spec_of(catalog, "t.newbie").effect is Effect.READ_ONLY


async def test_a_tool_an_untrusted_server_adds_at_once_is_listed_with_no_relaxed_policy() -> None:
    """A tool the server adds as soon as the connection is open is listed (the change came
    before the 2026-07-28 listen stream was open, and was lost until the next one), and is
    read as the first ones were: an untrusted server's `readOnlyHint` waives no approval and
    allows no retry."""
    catalog = Catalog()
    params = UpstreamParams(name="t", command=sys.executable, args=(UPSTREAM,))
    added = anyio.Event()
    catalog.subscribe(
        lambda e: added.set() if e.kind is ChangeKind.ADDED and e.tool.name == "t.newbie" else None
    )
    async with McpUpstream(params, catalog) as upstream:
        spec = spec_of(catalog, "t.add_tool")
        await upstream.invoke(spec, {"name": "newbie"}, ctx(spec))
        with anyio.fail_after(10):
            await added.wait()
        later = spec_of(catalog, "t.newbie")
    assert later.metadata["annotations"].get("readOnlyHint") is True  # what the server claims
    assert (later.effect, later.retry_safe) == (Effect.DESTRUCTIVE, False)


async def test_hung_upstream_times_out_by_the_deadline(
    test_upstream: tuple[McpUpstream, Catalog],
) -> None:
    upstream, catalog = test_upstream
    spec = spec_of(catalog, "t.hang")
    started = time.monotonic()
    with anyio.fail_after(5), pytest.raises(TimeoutError):
        await upstream.invoke(spec, {}, ctx(spec, timeout=0.5))
    assert time.monotonic() - started < 3


async def test_upstream_killed_mid_call_is_lost_then_reconnected(
    test_upstream: tuple[McpUpstream, Catalog],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A call waits for a lost connection during its first 5 s; on a busy machine the server
    # takes longer than that to start again, and the call would fail as unavailable.
    monkeypatch.setattr(mcp_connector, "_RECONNECT_WAIT", 90.0)
    upstream, catalog = test_upstream
    marker = tmp_path / "marker.txt"
    die, echo = spec_of(catalog, "t.die_midway"), spec_of(catalog, "t.echo")
    with anyio.fail_after(10), pytest.raises(OutcomeUnknown):
        await upstream.invoke(die, {"path": str(marker)}, ctx(die))
    assert marker.read_text() == "started\n"
    assert not upstream.connected
    # A call with no time to wait for the server's return fails at once: nothing was sent.
    with pytest.raises(UpstreamUnavailable):
        await upstream.invoke(echo, {"text": "x"}, ctx(echo, timeout=0.0))
    # One that may wait is sent once the server is back (it restarts within a second or
    # two when the machine is quiet, ten or more on a busy one), instead of failing as "not
    # connected" meanwhile.
    with anyio.fail_after(120):
        back = await upstream.invoke(echo, {"text": "back"}, ctx(echo, timeout=90))
    assert back["text"] == "back"
    assert upstream.connects == 2
    # An operator sees the server go, not only the reconnection that followed.
    assert "upstream 't': the connection ended" in caplog.text


def kill_and_reap_later(pid: int) -> None:
    """SIGKILL `pid` and return once it is dead, leaving it for its parent to reap (its pipes
    are closed; the event loop has not yet seen it)."""
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # (reaped already: dead too)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


async def test_a_write_sent_to_an_upstream_that_just_died_is_unavailable_not_unknown(
    tmp_path: Path,
) -> None:
    params = UpstreamParams(trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,))
    effects = tmp_path / "effects.txt"
    for attempt in range(8):  # (each time, the server dies before the connector notices)
        catalog = Catalog()
        async with McpUpstream(params, catalog) as upstream:
            write, pid = spec_of(catalog, "t.append_line"), spec_of(catalog, "t.pid")
            kill_and_reap_later((await upstream.invoke(pid, {}, ctx(pid)))["result"])
            # The request never left (the pipe refused it): retryable, not one for a person.
            with pytest.raises(UpstreamUnavailable):
                await upstream.invoke(write, {"path": str(effects), "line": "x"}, ctx(write))
        assert not effects.exists(), attempt


async def test_a_write_proposed_to_an_upstream_that_just_died_runs_once_when_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_connector, "_RECONNECT_WAIT", 90.0)  # (a busy machine: see above)
    effects = tmp_path / "effects.txt"
    keeper = Keeper(ledger=f"sqlite:///{tmp_path / 'l.db'}")
    params = UpstreamParams(trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,))
    agent = Principal(id="agent", grants=frozenset({"t:*"}))
    args = {"path": str(effects), "line": "x"}
    with anyio.fail_after(120):
        async with keeper, McpUpstream(params, keeper.catalog) as upstream:
            pid = spec_of(keeper.catalog, "t.pid")
            kill_and_reap_later((await upstream.invoke(pid, {}, ctx(pid)))["result"])
            call = ToolCall(call_id="w1", name="t.append_line", arguments=args, principal=agent)
            result = await keeper.execute(call)
    # Refused whole by the dead server's pipe, the write was retried on its restarted
    # process: done once, and no person asked to find out whether it happened.
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert effects.read_text() == "x\n"


async def test_unreachable_upstream_has_no_tools_and_refuses_calls() -> None:
    catalog = Catalog()
    params = UpstreamParams(
        name="gone", command=sys.executable, args=("-c", "pass"), connect_timeout=5
    )
    async with McpUpstream(params, catalog) as upstream:
        assert not upstream.connected
        assert len(catalog) == 0
        spec = ToolSpec(name="gone.tool", source="gone")
        with pytest.raises(UpstreamUnavailable):
            await upstream.invoke(spec, {}, ctx(spec))


async def test_every_page_of_the_tool_list_is_read() -> None:
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True,
        name="t",
        command=sys.executable,
        args=(UPSTREAM,),
        env={"PAGE_SIZE": "2", "EXTRA_TOOLS": "5"},
    )
    async with McpUpstream(params, catalog) as upstream:
        assert upstream.connected
        names = set(upstream.tool_names)
    assert {f"t.filler_{i}" for i in range(5)} | {"t.echo", "t.hang"} <= names
    assert len(names) == 13
    server = StdioServerParameters(
        command=sys.executable, args=[UPSTREAM], env={"PAGE_SIZE": "2", "EXTRA_TOOLS": "5"}
    )
    async with Client(server, cache=None) as client:
        first = await client.list_tools()
    assert (len(first.tools), first.next_cursor) == (2, "2")


async def test_a_result_the_sdk_cannot_parse_still_ends_the_call_once(tmp_path: Path) -> None:
    # A server cut an emoji in half: without its own parse, the answer is dropped, and this
    # write would time out as UNKNOWN_OUTCOME although the server answered.
    effects = tmp_path / "effects.txt"
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    raw = str(Path(__file__).with_name("raw_upstream.py"))
    params = UpstreamParams(
        trust_hints=True,
        name="raw",
        command=sys.executable,
        args=(raw,),
        protocol="legacy",
        timeout=10.0,
    )
    agent = Principal(id="agent", grants=frozenset({"raw:*"}))
    call = ToolCall(
        call_id="c1", name="raw.snippet", arguments={"path": str(effects)}, principal=agent
    )
    with anyio.fail_after(30):
        async with keeper, McpUpstream(params, keeper.catalog):
            result = await keeper.execute(call)
            again = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert "smile \ufffd" in str(result.data)
    assert again.replayed
    assert effects.read_text() == "called\n"


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        # -32000 is also the SDK's code for a closed connection; taken as that, this write
        # would end UNKNOWN_OUTCOME and wait for a person, though the server plainly refused.
        ("refuse", "upstream error -32000: the ledger service said no"),
        # `"error": "..."`, no error object: the answer did not parse, and the call ended
        # SUCCEEDED with a note that it "ran and finished", though the server said it failed.
        ("refuse_plainly", "upstream error -32603: the server answered with a malformed error"),
    ],
)
async def test_a_servers_own_error_is_a_tool_error_not_a_lost_connection(
    tmp_path: Path, tool: str, message: str
) -> None:
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    raw = str(Path(__file__).with_name("raw_upstream.py"))
    params = UpstreamParams(
        trust_hints=True, name="raw", command=sys.executable, args=(raw,), protocol="legacy"
    )
    agent = Principal(id="agent", grants=frozenset({"raw:*"}))
    call = ToolCall(call_id="c1", name=f"raw.{tool}", arguments={"path": "x"}, principal=agent)
    with anyio.fail_after(30):
        async with keeper, McpUpstream(params, keeper.catalog) as upstream:
            result = await keeper.execute(call)
            still = upstream.connected
    assert result.status is CallStatus.FAILED
    assert result.error is not None and result.error.code.value == "TOOL_ERROR"
    assert result.error.message == message
    assert still


RAW = str(Path(__file__).with_name("raw_upstream.py"))
RAW_AGENT = Principal(id="agent", grants=frozenset({"raw:*"}))


async def test_a_write_answered_with_a_malformed_result_is_recorded_as_done_never_failed(
    tmp_path: Path,
) -> None:
    # The write ran; FAILED would invite the same write again under a new call id.
    effects = tmp_path / "effects.txt"
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    params = UpstreamParams(
        trust_hints=True, name="raw", command=sys.executable, args=(RAW,), protocol="legacy"
    )
    call = ToolCall(
        call_id="c1", name="raw.garbled", arguments={"path": str(effects)}, principal=RAW_AGENT
    )
    with anyio.fail_after(30):
        async with keeper, McpUpstream(params, keeper.catalog):
            result = await keeper.execute(call)
            [record] = await keeper.store.list_calls()
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert "not a valid MCP tools/call result" in str(result.data)
    assert record.status is CallStatus.SUCCEEDED
    assert effects.read_text() == "called\n"


@pytest.mark.parametrize("tool", ["raw.huge", "raw.huge_last"])
async def test_an_answer_longer_than_a_line_may_be_ends_the_call_at_once_as_done(
    tmp_path: Path, tool: str
) -> None:
    # Dropped unread, it left the call waiting out its deadline: a read was run three times,
    # a write ended UNKNOWN_OUTCOME although the server had answered.
    effects = tmp_path / "effects.txt"
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    params = UpstreamParams(
        trust_hints=True,
        name="raw",
        command=sys.executable,
        args=(RAW,),
        protocol="legacy",
        timeout=120,
    )
    call = ToolCall(call_id="c1", name=tool, arguments={"path": str(effects)}, principal=RAW_AGENT)
    echo = ToolCall(call_id="c2", name="raw.odd name", arguments={}, principal=RAW_AGENT)
    with anyio.fail_after(60):
        async with keeper, McpUpstream(params, keeper.catalog) as upstream:
            result = await keeper.execute(call)
            after = await keeper.execute(echo)
            still = upstream.connects
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert "longer than the 64 MiB" in str(result.data)
    assert after.data == "odd" and still == 1  # the connection goes on
    assert effects.read_text() == "called\n"


async def test_a_failed_refresh_of_the_tool_list_keeps_the_connection_and_its_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True, name="raw", command=sys.executable, args=(RAW,), protocol="legacy"
    )
    added = anyio.Event()
    catalog.subscribe(
        lambda e: added.set() if e.kind is ChangeKind.ADDED and e.tool.name == "raw.late" else None
    )
    with anyio.fail_after(30):
        async with McpUpstream(params, catalog) as upstream:
            change = spec_of(catalog, "raw.change")
            await upstream.invoke(change, {"then": "fail"}, ctx(change))  # next listing fails
            await upstream.invoke(change, {"then": "add"}, ctx(change))
            await added.wait()  # the refresh after the failed one
            assert upstream.connects == 1  # never restarted (calls in flight go on)
            assert "raw.snippet" in upstream.tool_names
    assert "refreshing its tool list failed" in caplog.text


async def test_an_upstream_never_replaces_another_sources_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(name="t.echo", effect="read_only", permissions=["local:echo"])
    async def local_echo(text: str) -> str:
        return f"local {text}"

    params = UpstreamParams(trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,))
    async with McpUpstream(params, keeper.catalog) as upstream:
        tool = keeper.catalog.get("t.echo")
        names = upstream.tool_names
    assert tool is not None and tool.spec.permissions == ("local:echo",)
    assert "t.echo" not in names and "t.append_line" in names
    assert "tool 't.echo' is already provided by" in caplog.text


async def test_a_misspelled_tool_name_in_the_configuration_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`include = ["get_current_tme"]` started a gateway with no tools and no word why."""
    catalog = Catalog()
    params = UpstreamParams(
        trust_hints=True,
        name="time",
        command=sys.executable,
        args=("-m", "mcp_server_time"),
        include=("get_current_tme", "convert_time"),
    )
    with caplog.at_level("WARNING", logger="toolkeeper"):
        async with McpUpstream(params, catalog):
            names = [t.name for t in catalog]
    said = [r.getMessage() for r in caplog.records if "offers no tool" in r.getMessage()]
    assert names == ["time.convert_time"]
    assert len(said) == 1 and "'get_current_tme'" in said[0] and "get_current_time" in said[0]


async def test_a_call_on_an_upstream_closed_on_purpose_fails_without_waiting_for_it() -> None:
    catalog = Catalog()
    params = UpstreamParams(trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,))
    upstream = McpUpstream(params, catalog)
    await upstream.start()
    await upstream.wait_attempted()
    echo = spec_of(catalog, "t.echo")
    await upstream.aclose()
    # Not the wait for a lost connection to come back (up to 5 s): none will.
    with anyio.fail_after(2), pytest.raises(UpstreamUnavailable):
        await upstream.invoke(echo, {"text": "x"}, ctx(echo))


async def test_a_call_waiting_for_a_lost_upstream_stops_waiting_when_it_is_closed() -> None:
    upstream = McpUpstream(UpstreamParams(name="up", url="http://127.0.0.1:9/mcp"), Catalog())
    upstream._lost_at = time.monotonic()  # its connection was lost a moment ago
    spec = ToolSpec(name="up.w")
    outcomes: list[BaseException] = []

    async def call() -> None:
        try:
            await upstream.invoke(spec, {}, ctx(spec))
        except UpstreamUnavailable as exc:
            outcomes.append(exc)

    with anyio.fail_after(2):  # not the 5 s a lost connection is waited for
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.lowlevel.checkpoint()
            upstream.cancel()  # closed on purpose meanwhile
    assert len(outcomes) == 1


async def test_an_http_upstream_goes_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolkeeper.connectors._mcp_transports import http_client

    seen: list[bytes] = []

    async def proxy(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            seen.append((await stream.receive()).split(b"\r\n")[0])
            await stream.send(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    url = "http://upstream.internal.example:8080/mcp"
    async with (
        listener,
        http_client(UpstreamParams(name="up", url=url), print, print, print) as http,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(listener.serve, proxy)
        response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        tg.cancel_scope.cancel()
    assert response.status_code == 502
    assert seen == [b"POST http://upstream.internal.example:8080/mcp HTTP/1.1"]


LEAKY = str(Path(__file__).with_name("leaky_upstream.py"))


def _ledger_holds(folder: Path, needle: bytes) -> bool:
    """Whether the SQLite ledger's files (its WAL too) hold `needle`."""
    return any(needle in f.read_bytes() for f in folder.glob("l.db*"))


async def test_an_upstream_that_echoes_a_sensitive_argument_reaches_no_result_record_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream's schema marks `token` writeOnly; it echoes it in text, JSON escapes,
    structured content, errors, a malformed result and a line too long to read."""
    caplog.set_level(logging.DEBUG)
    token = "CANARY-UP-9d2e"
    keeper = Keeper(ledger=f"sqlite:///{tmp_path / 'l.db'}")
    params = UpstreamParams(
        trust_hints=True, name="leaky", command=sys.executable, args=(LEAKY,), protocol="legacy"
    )
    agent = Principal(id="agent", grants=frozenset({"leaky:*"}))
    ways = ["text", "structured", "is_error", "rpc_error", "garbled", "huge"]
    calls = [
        ToolCall(
            call_id=how,
            name="leaky.login",
            arguments={"token": token, "how": how},
            principal=agent,
        )
        for how in ways
    ]
    with anyio.fail_after(60):
        async with keeper, McpUpstream(params, keeper.catalog):
            results = [await keeper.execute(call) for call in calls]
            records = await keeper.store.list_calls()
    assert [r.status.value for r in results] == [
        "SUCCEEDED",
        "SUCCEEDED",
        "FAILED",
        "FAILED",
        "SUCCEEDED",
        "SUCCEEDED",
    ]
    assert "welcome [REDACTED] ([REDACTED])" in str(results[0].data)
    assert len(records) == len(ways)
    shown = [repr(r) for r in (*results, *records)]
    assert [s for s in shown if "CANARY" in s] == []
    assert [r.getMessage() for r in caplog.records if "CANARY" in r.getMessage()] == []
    assert not _ledger_holds(tmp_path, b"CANARY")
