"""What one HTTP client may hold of the gateway: sessions per principal (capped, ended when
idle), and the time it has to send a request (a slow client is cut off)."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from toolkeeper.config import ServerSettings
from toolkeeper.core.errors import sole_cause
from toolkeeper.server import Deployment
from toolkeeper.server import transports as T
from toolkeeper.server.call_ids import REPEAT_WINDOW

from ..conftest import MCP_INITIALIZE
from .conftest import TOKENS, connected, serving

pytestmark = pytest.mark.anyio


async def initialize(url: str, token: str) -> httpx2.Response:
    """A handshake-era `initialize`, which opens a session."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=MCP_INITIALIZE, headers=headers)


async def test_a_principal_at_its_session_cap_is_refused_and_the_others_still_connect(
    deployment: Deployment,
) -> None:
    """One read-only token opened 10,000 sessions (the SDK's cap for the whole process) and
    every principal then got 503."""
    async with serving(deployment, max_sessions_per_principal=2) as url:
        async with AsyncExitStack() as stack:
            for _ in range(2):
                await stack.enter_async_context(connected(url, TOKENS["bob"], mode="legacy"))
            refused = await initialize(url, TOKENS["bob"])
            with pytest.raises(BaseExceptionGroup) as client_refused:  # (its task group)
                async with connected(url, TOKENS["bob"], mode="legacy"):
                    pass
            async with connected(url, TOKENS["alice"], mode="legacy") as alice:
                listed = await alice.call_tool("demo.list_notes", {})
            modern = await stack.enter_async_context(connected(url, TOKENS["bob"]))
            assert not (await modern.call_tool("demo.list_notes", {})).is_error
        # Its clients ended their sessions (DELETE): it may open others.
        async with connected(url, TOKENS["bob"], mode="legacy") as bob:
            again = await bob.call_tool("demo.list_notes", {})
    assert refused.status_code == 429
    assert isinstance(sole_cause(client_refused.value), MCPError)
    assert "at most 2" in refused.json()["error"]["message"]
    assert not listed.is_error and not again.is_error


async def test_a_principal_at_its_request_cap_is_refused_and_the_others_still_connect(
    deployment: Deployment,
) -> None:
    """A 2026-07-28 client holds no session, but each `subscriptions/listen` stream holds a
    connection and a task for as long as it is open: one read-only token's streams took every
    file descriptor of the gateway, and every principal's connection was then refused."""
    async with serving(deployment, max_requests_per_principal=2) as url:
        async with AsyncExitStack() as stack:
            bob = await stack.enter_async_context(connected(url, TOKENS["bob"]))
            for _ in range(2):
                await stack.enter_async_context(bob.listen(tools_list_changed=True))
            with pytest.raises(MCPError):
                async with bob.listen(tools_list_changed=True):
                    pass
            async with connected(url, TOKENS["alice"]) as alice:
                listed = await alice.call_tool("demo.list_notes", {})
        # Its streams ended: it may open others.
        async with connected(url, TOKENS["bob"]) as bob, bob.listen(tools_list_changed=True):
            again = await bob.call_tool("demo.list_notes", {})
    assert not listed.is_error and not again.is_error


async def test_concurrent_and_failed_openings_keep_the_count_exact(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    statuses: list[int] = []
    async with serving(deployment, max_sessions_per_principal=3) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            for _ in range(5):  # not an initialize: refused, and the session it began let go
                bad = await http.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={
                        "Authorization": f"Bearer {TOKENS['bob']}",
                        "Accept": "application/json, text/event-stream",
                    },
                )
                assert bad.status_code == 400

        async def one() -> None:
            statuses.append((await initialize(url, TOKENS["bob"])).status_code)

        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(one)
    assert sorted(statuses) == [200] * 3 + [429] * 9
    # a flood of refusals is one line in the log, not one each
    assert [r.name for r in caplog.records].count("toolkeeper.server.limits") == 1


async def test_an_idle_session_ends_and_gives_its_place_back(deployment: Deployment) -> None:
    async with serving(deployment, max_sessions_per_principal=1, session_idle_timeout=0.2) as url:
        first = await initialize(url, TOKENS["bob"])
        session = first.headers["mcp-session-id"]
        with anyio.fail_after(10):
            # (each refused attempt leaves the first session alone, which expires meanwhile)
            while (second := await initialize(url, TOKENS["bob"])).status_code == 429:
                pass
        async with httpx2.AsyncClient(timeout=30) as http:
            gone = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {TOKENS['bob']}",
                    "Accept": "application/json, text/event-stream",
                    "Mcp-Session-Id": session,
                    "Mcp-Protocol-Version": "2025-06-18",
                },
            )
    assert (first.status_code, second.status_code, gone.status_code) == (200, 200, 404)


async def closed_while_trickling(port: int, start: bytes, trickle: bytes) -> float:
    """Send `start`, then one byte of `trickle` after another until the gateway closes the
    connection; the seconds that took."""
    began = time.monotonic()
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        if start:
            await stream.send(start)
        for byte in trickle:
            with anyio.move_on_after(0.05):  # (waiting for the close, a byte at a time)
                try:
                    if await stream.receive() == b"":
                        break
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    break
            await stream.send(bytes([byte]))
        else:
            raise AssertionError("the connection was never closed")
    return time.monotonic() - began


@pytest.mark.parametrize(
    "start",
    [
        pytest.param(b"", id="nothing"),
        pytest.param(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", id="header"),
        pytest.param(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            b"Authorization: Bearer " + TOKENS["bob"].encode() + b"\r\n"
            b"Content-Length: 100000\r\n\r\n{",
            id="body",
        ),
    ],
)
async def test_a_client_trickling_a_request_is_cut_off_and_others_are_served(
    deployment: Deployment, start: bytes
) -> None:
    async with serving(deployment, request_timeout=0.3) as url:
        port = int(url.split(":")[2].split("/")[0])
        with anyio.fail_after(10):
            took = await closed_while_trickling(port, start, b"x" * 10_000)
        answer = await initialize(url, TOKENS["alice"])
    assert 0.3 <= took < 5
    assert answer.status_code == 200


async def test_a_slow_answer_is_not_cut_off(deployment: Deployment) -> None:
    """Only receiving a request has a deadline, not waiting for its answer."""
    started, release = anyio.Event(), anyio.Event()

    @deployment.keeper.tool(name="demo.slow", effect="read_only", permissions=["notes:*"])
    async def slow() -> str:
        started.set()
        await release.wait()
        return "done"

    answers: list[object] = []
    async with (
        # (a deadline a busy machine meets: 0.2 s cut off the client's own requests)
        serving(deployment, request_timeout=1.5) as url,
        connected(url, TOKENS["alice"], mode="legacy") as alice,
        anyio.create_task_group() as tg,
    ):

        async def call() -> None:
            answers.append(await alice.call_tool("demo.slow", {}))

        tg.start_soon(call)
        with anyio.fail_after(10):
            await started.wait()
        with anyio.move_on_after(4.5):  # three request deadlines, the call still running
            await anyio.Event().wait()
        release.set()
    [answer] = answers
    assert not answer.is_error  # type: ignore[attr-defined]
    assert answer.content[0].text == "done"  # type: ignore[attr-defined]


def test_the_configured_defaults_are_the_transports() -> None:
    settings = ServerSettings()
    assert settings.max_sessions_per_principal == T.DEFAULT_SESSIONS_PER_PRINCIPAL == 100
    assert settings.max_requests_per_principal == T.DEFAULT_REQUESTS_PER_PRINCIPAL == 200
    assert settings.session_idle_timeout == T.DEFAULT_SESSION_IDLE_TIMEOUT == 300
    assert settings.request_timeout == T.DEFAULT_REQUEST_TIMEOUT == 30
    assert settings.repeat_window == REPEAT_WINDOW == 5
