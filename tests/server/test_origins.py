"""The HTTP gateway takes a request only when its `Host` names the gateway and a browser's
`Origin` is allowed (DNS rebinding), whatever address it is bound to; over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial

import anyio
import httpx2
import pytest

from toolkeeper.core import Principal
from toolkeeper.keeper import Keeper
from toolkeeper.server.gateway import Gateway, GatewayPrincipal
from toolkeeper.server.transports import serve_http

from ..conftest import APP, MCP_INITIALIZE

pytestmark = pytest.mark.anyio

TOKEN = "tok-0123456789abcdef"


@asynccontextmanager
async def serving(
    host: str, *, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> AsyncIterator[int]:
    """A gateway served by uvicorn on `host`; yields its port."""
    principal = Principal(id="bot", grants=frozenset({"*"}))
    gateway = Gateway(
        Keeper(principal=APP, ledger="memory://"),
        [GatewayPrincipal(principal=principal, token=TOKEN, exposure="direct")],
    )
    ready = anyio.Event()
    ports: list[int] = []

    def started(port: int) -> None:
        ports.append(port)
        ready.set()

    serve = partial(
        serve_http,
        gateway,
        host=host,
        port=0,
        started=started,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        with anyio.fail_after(10):
            await ready.wait()
        yield ports[0]
        tg.cancel_scope.cancel()


async def initialize(port: int, **headers: str) -> httpx2.Response:
    """An `initialize` with a valid token, sent to 127.0.0.1 with these headers."""
    sent = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        **{name.replace("_", "-"): value for name, value in headers.items()},
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"http://127.0.0.1:{port}/mcp", json=MCP_INITIALIZE, headers=sent)


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
async def test_a_web_page_of_another_site_is_refused_403(bind: str) -> None:
    async with serving(bind) as port:
        answer = await initialize(port, Origin="http://evil.example")
    assert answer.status_code == 403
    assert "protocolVersion" not in answer.text


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
async def test_a_name_pointed_at_the_gateway_is_refused_421(bind: str) -> None:
    """DNS rebinding: a page of evil.example whose name now resolves to the gateway."""
    async with serving(bind) as port:
        rebound = await initialize(
            port, Host=f"evil.example:{port}", Origin=f"http://evil.example:{port}"
        )
        without_origin = await initialize(port, Host=f"evil.example:{port}")
    assert (rebound.status_code, without_origin.status_code) == (421, 421)


async def test_clients_reach_a_gateway_on_every_interface_by_address_or_localhost() -> None:
    async with serving("0.0.0.0") as port:
        hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"192.0.2.7:{port}", f"[::1]:{port}"]
        answers = [await initialize(port, Host=host) for host in hosts]
        same_origin = await initialize(
            port, Host=f"192.0.2.7:{port}", Origin=f"http://192.0.2.7:{port}"
        )
    assert [a.status_code for a in answers] == [200] * len(hosts)
    assert same_origin.status_code == 200


async def test_a_loopback_gateway_takes_pages_of_its_own_port_on_local_names() -> None:
    async with serving("127.0.0.1") as port:
        own = [
            await initialize(port, Origin=f"http://{name}:{port}")
            for name in ("127.0.0.1", "localhost", "[::1]")
        ]
        other_port = await initialize(port, Origin=f"http://localhost:{port + 1}")
    assert [a.status_code for a in own] == [200, 200, 200]
    assert other_port.status_code == 403


async def test_configured_hosts_and_origins_are_taken_and_no_others() -> None:
    async with serving(
        "127.0.0.1",
        allowed_hosts=["mcp.example.com"],
        allowed_origins=["https://app.example.com", "http://localhost:*"],
    ) as port:
        proxied = await initialize(port, Host="MCP.example.com")
        app = await initialize(port, Host="mcp.example.com", Origin="https://app.example.com")
        dev = await initialize(port, Origin="http://localhost:5173")
        other_host = await initialize(port, Host="other.example.com")
        other_origin = await initialize(port, Origin="https://other.example.com")
        null_origin = await initialize(port, Origin="null")
    assert [proxied.status_code, app.status_code, dev.status_code] == [200, 200, 200]
    assert other_host.status_code == 421
    assert (other_origin.status_code, null_origin.status_code) == (403, 403)


async def test_a_page_of_an_allowed_origin_may_send_its_token_and_read_the_session() -> None:
    """What a browser checks (CORS) before and after a page's request with a bearer token."""
    page = "http://localhost:6274"
    asks = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
    }
    async with serving("127.0.0.1", allowed_origins=[page]) as port:
        async with httpx2.AsyncClient(timeout=30) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            preflight = await http.options(url, headers={"Origin": page, **asks})
            other = await http.options(url, headers={"Origin": "http://evil.example", **asks})
        answer = await initialize(port, Origin=page)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == page
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "authorization" in preflight.headers["access-control-allow-headers"]
    assert other.status_code == 403
    assert "access-control-allow-origin" not in other.headers
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == page
    assert "mcp-session-id" in answer.headers["access-control-expose-headers"]


async def test_the_operators_api_refuses_in_its_own_error_shape_and_mcp_in_json_rpc() -> None:
    async with serving("127.0.0.1") as port, httpx2.AsyncClient(timeout=30) as http:
        base = f"http://127.0.0.1:{port}"
        page = await http.get(f"{base}/api/v1/approvals", headers={"Origin": "http://evil.example"})
        named = await http.get(f"{base}/api/v1/approvals", headers={"Host": "evil.example"})
        mcp = await initialize(port, Origin="http://evil.example")
    assert (page.status_code, page.json()["error"]["code"]) == (403, "FORBIDDEN")
    assert (named.status_code, named.json()["error"]["code"]) == (421, "HOST_NOT_ALLOWED")
    assert mcp.json()["error"]["code"] == -32600 and mcp.json()["id"] is None
