"""The gateway over streamable HTTP (bearer tokens) and stdio, with the official SDK client and
the MCP Inspector CLI as downstream clients."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from toolkeeper.catalog import Catalog
from toolkeeper.connectors.base import UpstreamUnavailable
from toolkeeper.connectors.mcp import McpUpstream, UpstreamParams
from toolkeeper.core import ANONYMOUS, CallContext, CallStatus, Principal, ToolSpec
from toolkeeper.keeper import Keeper
from toolkeeper.server import Deployment
from toolkeeper.server.gateway import Gateway, GatewayPrincipal
from toolkeeper.server.transports import http_app, serve_http

from ..conftest import APP, MCP_INITIALIZE
from .conftest import ROOT, TOKENS, ClientFactory, config_text

pytestmark = pytest.mark.anyio

CLI = "from toolkeeper.cli import main; raise SystemExit(main())"


async def names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_each_principal_lists_only_the_tools_it_is_granted(
    http_client: ClientFactory,
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        seen_by_alice = await names(alice)
    async with http_client(TOKENS["bob"]) as bob:
        seen_by_bob = await names(bob)
    assert {"demo.add_note", "demo.clear_notes", "t.echo", "t.append_line"} <= seen_by_alice
    assert seen_by_bob == {"demo.list_notes"}


@pytest.mark.parametrize("token", [None, "not-a-token"])
async def test_a_request_without_a_valid_token_gets_401_and_sees_nothing(
    gateway_url: str, token: str | None
) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient() as http:
        response = await http.post(gateway_url, json=body, headers=headers)
    assert response.status_code == 401
    assert "demo." not in response.text


@pytest.mark.parametrize("token", ["\u00e9t\u00e9", "alice-token-\u00e9"])
async def test_a_token_outside_ascii_gets_401_not_a_server_error(
    gateway_url: str, token: str
) -> None:
    """The comparison raised TypeError on a non-ASCII token: 500, a traceback in the log."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}".encode("latin-1"),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient() as http:
        response = await http.post(gateway_url, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer ")


async def test_sdk_client_without_a_token_cannot_connect(http_client: ClientFactory) -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK raises its transport's error
        async with http_client(None) as client:
            await client.list_tools()


async def test_another_principals_token_cannot_call_a_tool_it_is_not_granted(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    target = tmp_path / "lines.txt"
    async with http_client(TOKENS["bob"]) as bob:
        with pytest.raises(MCPError) as refused:
            await bob.call_tool("t.append_line", {"path": str(target), "line": "x"})
    assert "Unknown tool" in refused.value.message
    assert not target.exists()
    assert await deployment.keeper.store.list_calls() == []


async def test_a_granted_call_over_http_runs_and_is_recorded(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    target = tmp_path / "lines.txt"
    async with http_client(TOKENS["alice"]) as alice:
        result = await alice.call_tool("t.append_line", {"path": str(target), "line": "one"})
    assert not result.is_error
    assert target.read_text() == "one\n"
    [record] = await deployment.keeper.store.list_calls()
    assert (record.tool, record.principal_id, record.status) == (
        "t.append_line",
        "alice",
        CallStatus.SUCCEEDED,
    )


def stdio_server(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", CLI, "serve", "--config", str(config), "--stdio"],
        env={"PYTHONPATH": str(ROOT / "src")},
    )


async def test_stdio_client_lists_and_calls_through_the_gateway(config_file: Path) -> None:
    with anyio.fail_after(60):
        async with Client(stdio_server(config_file)) as client:
            assert "t.echo" in await names(client)
            result = await client.call_tool("t.echo", {"text": "hi"})
    assert result.structured_content is not None
    assert result.structured_content["text"] == "hi"
    assert str(result.structured_content["key"]).startswith("tk_")


async def test_stdio_principal_cannot_list_or_call_what_it_is_not_granted(tmp_path: Path) -> None:
    config = tmp_path / "bob.toml"
    config.write_text(config_text(tmp_path, stdio_principal="bob"))
    with anyio.fail_after(60):
        async with Client(stdio_server(config)) as client:
            assert await names(client) == {"demo.list_notes"}
            with pytest.raises(MCPError):
                await client.call_tool("t.echo", {"text": "hi"})


async def test_a_line_that_is_not_json_rpc_does_not_end_the_stdio_session(
    config_file: Path,
) -> None:
    params = stdio_server(config_file)
    lines = [
        b"this is not json\n",
        json.dumps(MCP_INITIALIZE).encode() + b"\n",
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}\n',
    ]
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [params.command, *params.args],
            env={**os.environ, **(params.env or {})},
            stderr=subprocess.DEVNULL,
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            for line in lines:
                await process.stdin.send(line)
            buffer = b""
            answers: dict[int, dict[str, object]] = {}
            while 2 not in answers:
                buffer += await process.stdout.receive()
                *complete, buffer = buffer.split(b"\n")
                for raw in complete:
                    message = json.loads(raw)
                    if "id" in message:
                        answers[message["id"]] = message
            await process.stdin.aclose()
    result = answers[2]["result"]
    assert isinstance(result, dict)
    assert "t.echo" in {tool["name"] for tool in result["tools"]}


INSPECTOR = ROOT / ".cache" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


def inspector(*args: str) -> subprocess.CompletedProcess[str]:
    if not INSPECTOR.exists():
        if os.environ.get("CI") or shutil.which("npm") is None:
            pytest.fail("the MCP Inspector is not installed: run `make inspector`")
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(ROOT / ".cache" / "inspector"),
                "--no-audit",
                "--no-fund",
                "@modelcontextprotocol/inspector@0.15.0",
            ],
            check=True,
            capture_output=True,
        )
    return subprocess.run(
        [str(INSPECTOR), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )


def test_inspector_cli_lists_and_calls_tools_through_the_gateway(config_file: Path) -> None:
    serve = [sys.executable, "--", "-c", CLI, "serve", "--config", str(config_file), "--stdio"]
    listed = inspector(*serve, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert "t.echo" in {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    called = inspector(
        *serve, "--method", "tools/call", "--tool-name", "t.echo", "--tool-arg", "text=inspected"
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["isError"] is False
    assert result["structuredContent"]["text"] == "inspected"


async def test_inspector_cli_without_a_token_sees_no_tools(gateway_url: str) -> None:
    listed = await anyio.to_thread.run_sync(
        lambda: inspector(gateway_url, "--transport", "http", "--method", "tools/list")
    )
    assert listed.returncode != 0
    assert "demo." not in listed.stdout


def upstream_context(spec: ToolSpec, *, timeout: float = 30) -> CallContext:
    return CallContext(
        call_id="outer-1",
        task_id="outer",
        tool=spec.name,
        version=spec.version,
        principal=ANONYMOUS,
        attempt=1,
        deadline=time.monotonic() + timeout,
        idempotency_key="outer-key",
    )


async def test_the_gateway_is_itself_an_upstream_over_streamable_http(gateway_url: str) -> None:
    catalog = Catalog()
    auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
    params = UpstreamParams(name="gw", url=gateway_url, headers=auth, connect_timeout=20)
    async with McpUpstream(params, catalog) as upstream:
        tool = catalog.get("gw.t.echo")
        assert tool is not None
        data = await upstream.invoke(tool.spec, {"text": "via http"}, upstream_context(tool.spec))
    assert data["text"] == "via http"
    assert "gw.demo.clear_notes" in {t.name for t in catalog}


async def test_a_handshake_era_http_upstream_that_restarted_is_reconnected(
    deployment: Deployment,
) -> None:
    """HTTP 404 to a request in a session: the server forgot it (it restarted). Every later
    call failed "Session not found" until the gateway itself restarted."""
    ports: list[int] = []

    async def serve(port: int, started: anyio.Event, stop: anyio.Event, ended: anyio.Event) -> None:
        def note(bound: int) -> None:
            ports.append(bound)
            started.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve_http, deployment.gateway, port=port, started=note))
            await stop.wait()
            tg.cancel_scope.cancel()
        ended.set()

    catalog = Catalog()
    auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            first = [anyio.Event() for _ in range(3)]
            tg.start_soon(serve, 0, *first)
            await first[0].wait()
            params = UpstreamParams(
                name="gw",
                url=f"http://127.0.0.1:{ports[0]}/mcp",
                headers=auth,
                protocol="legacy",
                connect_timeout=20,
            )
            async with McpUpstream(params, catalog) as upstream:
                tool = catalog.get("gw.t.echo")
                assert tool is not None
                spec = tool.spec
                await upstream.invoke(spec, {"text": "one"}, upstream_context(spec))
                first[1].set()  # the server stops...
                await first[2].wait()
                second = [anyio.Event() for _ in range(3)]
                tg.start_soon(serve, ports[0], *second)  # ...and starts again, sessions gone
                await second[0].wait()
                with pytest.raises(UpstreamUnavailable, match="forgot the session"):
                    await upstream.invoke(spec, {"text": "two"}, upstream_context(spec))
                await upstream.wait_connected()
                data = await upstream.invoke(spec, {"text": "three"}, upstream_context(spec))
                connects = upstream.connects
            second[1].set()
    assert data["text"] == "three"
    assert connects == 2


async def test_a_write_to_an_http_upstream_that_is_down_is_known_not_sent(
    tmp_path: Path,
) -> None:
    """A refused connection sends nothing: such a write was UNKNOWN_OUTCOME, for a person to
    reconcile, although it never left (every write while a handshake-era server, which keeps
    no stream open to notice its going, was down)."""
    config = tmp_path / "up.toml"
    config.write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/up.db"\nport = 0\n'
        f'[[tools]]\nfile = "{ROOT / "examples" / "demo_tools.py"}"\n'
        '[principals.gw]\ntoken = "gw-token-0123456789"\ngrants = ["notes:*"]\n'
    )
    command = [
        sys.executable,
        "-c",
        "from toolkeeper.cli import main; raise SystemExit(main())",
        *("serve", "--config", str(config)),
    ]
    catalog = Catalog()
    with anyio.fail_after(60):
        async with await anyio.open_process(command) as server:
            assert server.stdout is not None
            banner = b""
            async for chunk in server.stdout:
                banner += chunk
                if b"toolkeeper gateway on " in banner and banner.endswith(b"\n"):
                    break
            url = next(
                line.split()[-1]
                for line in banner.decode().splitlines()
                if line.startswith("toolkeeper gateway on ")
            )
            auth = {"Authorization": "Bearer gw-token-0123456789"}
            params = UpstreamParams(
                name="up", url=url, headers=auth, connect_timeout=20, protocol="legacy"
            )
            async with McpUpstream(params, catalog) as upstream:
                tool = catalog.get("up.demo.add_note")
                assert tool is not None
                server.kill()  # the upstream server goes away
                await server.wait()
                with pytest.raises(UpstreamUnavailable, match="could not be reached"):
                    await upstream.invoke(
                        tool.spec, {"text": "x"}, upstream_context(tool.spec, timeout=2)
                    )


async def test_an_http_upstream_refusing_the_token_provides_no_tools_and_says_why(
    gateway_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The log said only "MCPError: Server returned an error response", at every retry."""
    catalog = Catalog()
    auth = {"Authorization": "Bearer wrong"}
    params = UpstreamParams(name="gw", url=gateway_url, headers=auth, connect_timeout=10)
    with caplog.at_level("WARNING", logger="toolkeeper"):
        async with McpUpstream(params, catalog) as upstream:
            assert not upstream.connected
    assert len(catalog) == 0
    assert "upstream 'gw': the server refused the credentials (HTTP 401)" in caplog.text


@pytest.mark.parametrize("host", ["::1", "[::1]", "127.0.0.1"])
async def test_a_loopback_gateway_refuses_requests_for_another_host(host: str) -> None:
    """DNS rebinding: `--host [::1]` (brackets, as in a URL) turned the Host check off."""
    keeper = Keeper(principal=APP, ledger="memory://")
    token = "tok-0123456789abcdef"
    gateway = Gateway(
        keeper,
        [GatewayPrincipal(principal=Principal(id="bot"), token=token, exposure="direct")],
    )
    app = http_app(gateway, host=host, path="/mcp")
    headers = {
        "Host": "evil.example",
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
    }
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://x") as http,
    ):
        answer = await http.post("/mcp", headers=headers, json=ping)
    assert answer.status_code == 421
