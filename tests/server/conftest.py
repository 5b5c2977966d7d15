"""A gateway built from a real configuration: the example demo tools, the test upstream over
stdio, a SQLite ledger, and three principals."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolkeeper.config import parse_config
from toolkeeper.server import Deployment, build, serve_http

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "connectors" / "upstream_server.py"

TOKENS = {
    "alice": "alice-token-1",
    "bob": "bob-token-2",
    "carol": "carol-token-3",
    "erin": "erin-token-4",
    "dave": "dave-token-5",
}

OPERATORS = {
    "olga": "olga-approver-token-1",
    "alma": "alma-approver-token-2",
    "vic": "vic-viewer-token-3333",
    "ada": "ada-admin-token-44444",
}
"""Operators of the API and console: olga approves; alma approves, but is alice (four eyes);
vic only reads; ada is an admin."""


def config_text(
    tmp_path: Path,
    *,
    stdio_principal: str = "alice",
    trust_hints: bool = True,
    repeat_window: float = 0,
    upstream: bool = True,
) -> str:
    """The tests' gateway: its writes run again as soon as they ended (`repeat_window = 0`),
    unless a test asks for the window; without `upstream`, only its local tools (it starts
    faster)."""
    text = f"""
[server]
ledger = "sqlite:///{tmp_path}/ledger.db"
stdio_principal = "{stdio_principal}"
repeat_window = {repeat_window}

[[tools]]
file = "{ROOT / "examples" / "demo_tools.py"}"

[upstreams.t]
command = "{sys.executable}"
args = ["{UPSTREAM}"]
# (generous: a call waits for the server to be back, which on a busy machine takes seconds)
timeout = 60
connect_timeout = 60
trust_hints = {str(trust_hints).lower()}

[principals.alice]
token = "{TOKENS["alice"]}"
grants = ["notes:*", "t:*"]
approve_by_elicitation = true

[principals.bob]
token = "{TOKENS["bob"]}"
grants = ["notes:read"]

[principals.carol]
token = "{TOKENS["carol"]}"
grants = ["notes:*"]
exposure = "progressive"
approve_by_elicitation = true

[principals.erin]
token = "{TOKENS["erin"]}"
grants = ["notes:*"]
approve_by_elicitation = false

[principals.dave]
token = "{TOKENS["dave"]}"
grants = ["notes:*"]

[operators.olga]
token = "{OPERATORS["olga"]}"
role = "approver"

[operators.alma]
token = "{OPERATORS["alma"]}"
role = "approver"
principals = ["alice"]

[operators.vic]
token = "{OPERATORS["vic"]}"
role = "viewer"

[operators.ada]
token = "{OPERATORS["ada"]}"
role = "admin"
"""
    if not upstream:
        start = text.index("[upstreams.t]")
        text = text[:start] + text[text.index("[principals.alice]") :]
    return text


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "toolkeeper.toml"
    path.write_text(config_text(tmp_path))
    return path


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    config = parse_config(config_text(tmp_path), file="test.toml", base_dir=str(tmp_path))
    async with build(config) as running:
        assert all(u.connected for u in running.upstreams)
        yield running


@asynccontextmanager
async def serving(deployment: Deployment, **options: Any) -> AsyncIterator[str]:
    """The URL of `deployment`'s gateway, served over streamable HTTP on a free port
    (`options`: more arguments of `serve_http`), with the operators' API and console."""
    ready = anyio.Event()
    ports: list[int] = []

    def started(port: int) -> None:
        ports.append(port)
        ready.set()

    async with anyio.create_task_group() as tg:
        options.setdefault("operators", deployment.operators)
        tg.start_soon(partial(serve_http, deployment.gateway, port=0, started=started, **options))
        with anyio.fail_after(60):  # (seconds on a busy machine)
            await ready.wait()
        yield f"http://127.0.0.1:{ports[0]}/mcp"
        tg.cancel_scope.cancel()


@asynccontextmanager
async def connected(url: str, token: str | None, **options: object) -> AsyncIterator[Client]:
    """The official MCP client, connected to `url` with `token`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,  # type: ignore[arg-type]
    ):
        yield client


async def upstreams_back(deployment: Deployment) -> None:
    """Return once every upstream of `deployment` is connected again: one that died restarts
    in a second or two on a quiet machine, ten or more on a busy one, and a call proposed
    meanwhile fails as unavailable once the connector's short wait for it is over."""
    with anyio.fail_after(120):
        for upstream in deployment.upstreams:
            await upstream.wait_connected()


@pytest.fixture
async def gateway_url(deployment: Deployment) -> AsyncIterator[str]:
    async with serving(deployment) as url:
        yield url


ClientFactory = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def http_client(gateway_url: str) -> ClientFactory:
    return partial(connected, gateway_url)
