"""What the attacks run against: a real `Keeper` on a SQLite file, and a real gateway (the
adversarial tools, an upstream we do not control over stdio, a SQLite ledger) reached with the
official `mcp` client over streamable HTTP and stdio."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client, StdioServerParameters

from toolkeeper import Keeper
from toolkeeper.config import parse_config
from toolkeeper.server import Deployment, build

from ..server.conftest import ClientFactory, connected, serving
from . import tools

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
UPSTREAM = HERE / "upstream.py"
TOOLS = HERE / "tools.py"
CLI = "from toolkeeper.cli import main; raise SystemExit(main())"

MCP_INITIALIZE_LINES = [
    {
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "attacker", "version": "0"},
        },
    },
    {"method": "notifications/initialized"},
]
"""A raw client's handshake (a `RawSession` adds `jsonrpc`)."""

TOKENS = {
    "mallory": "mallory-token-0001",  # every grant a client of the adversarial tools gets
    "reader": "reader-token-0002",  # read-only
    "prog": "prog-token-0003",  # progressive exposure
    "asker": "asker-token-0004",  # says nothing of elicitation: the defaults apply
    "person": "person-token-0005",  # its client's user answers approval questions
}


def config_text(tmp_path: Path, *, extra: str = "", stdio_principal: str = "mallory") -> str:
    return f"""
[server]
ledger = "sqlite:///{tmp_path}/ledger.db"
stdio_principal = "{stdio_principal}"

[[tools]]
file = "{TOOLS}"

[upstreams.t]
command = "{sys.executable}"
args = ["{UPSTREAM}"]
# (generous: a call waits for the server to be back, which on a busy machine takes seconds)
timeout = 60
connect_timeout = 60

# The operator's facts about the writes (sneaky_delete has only its server's word).
[upstreams.t.tools.slow_append]
effect = "write"
idempotent = false

[upstreams.t.tools.die_midway]
effect = "write"
idempotent = false

[principals.mallory]
token = "{TOKENS["mallory"]}"
grants = ["adv:read", "adv:write", "t:*"]
approve_by_elicitation = false

[principals.reader]
token = "{TOKENS["reader"]}"
grants = ["adv:read"]
approve_by_elicitation = false

[principals.prog]
token = "{TOKENS["prog"]}"
grants = ["adv:read", "adv:write", "t:*"]
exposure = "progressive"
approve_by_elicitation = false

[principals.asker]
token = "{TOKENS["asker"]}"
grants = ["adv:read", "adv:write", "t:*"]

[principals.person]
token = "{TOKENS["person"]}"
grants = ["adv:read", "adv:write"]
approve_by_elicitation = true
{extra}
"""


@pytest.fixture
def keeper(tmp_path: Path) -> Keeper:
    """A keeper as an application makes it: a SQLite file, its audit file beside it."""
    made = Keeper(ledger=f"sqlite:///{tmp_path / 'ledger.db'}")
    tools.register(made)
    return made


@pytest.fixture
def effect_file(tmp_path: Path) -> Path:
    return tmp_path / "effects.txt"


@asynccontextmanager
async def deployment_of(tmp_path: Path, extra: str = "") -> AsyncIterator[Deployment]:
    text = config_text(tmp_path, extra=extra)
    config = parse_config(text, file="adversarial.toml", base_dir=str(tmp_path))
    async with build(config) as running:
        yield running


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    async with deployment_of(tmp_path) as running:
        yield running


@asynccontextmanager
async def http_gateway(deployment: Deployment) -> AsyncIterator[ClientFactory]:
    """The deployment served over streamable HTTP; yields a factory of SDK clients."""
    async with serving(deployment) as url:
        yield partial(connected, url)


@pytest.fixture
async def http_client(deployment: Deployment) -> AsyncIterator[ClientFactory]:
    async with http_gateway(deployment) as connect:
        yield connect


def stdio_params(config: Path) -> StdioServerParameters:
    """`toolkeeper serve --config CONFIG --stdio`, this checkout's sources first."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", CLI, "serve", "--config", str(config), "--stdio"],
        env={"PYTHONPATH": str(ROOT / "src")},
    )


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "adversarial.toml"
    path.write_text(config_text(tmp_path))
    return path


def code_of(result: mcp_types.CallToolResult) -> str | None:
    """The stable error code the gateway puts in a result's `_meta` (None: no error)."""
    return (result.meta or {}).get("dev.toolkeeper/error-code")


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@asynccontextmanager
async def gateway_client(
    transport: str, tmp_path: Path, principal: str, **options: Any
) -> AsyncIterator[Client]:
    """An SDK client of a gateway on this test's configuration, as `principal`: over
    streamable HTTP (the gateway in this process) or stdio (`toolkeeper serve --stdio`)."""
    if transport == "stdio":
        config = tmp_path / f"{principal}.toml"
        config.write_text(config_text(tmp_path, stdio_principal=principal))
        with anyio.fail_after(60):
            async with Client(stdio_params(config), **options) as client:
                yield client
        return
    async with (
        deployment_of(tmp_path) as deployment,
        http_gateway(deployment) as connect,
        connect(TOKENS[principal], **options) as client,
    ):
        yield client


TRANSPORTS = ["http", "stdio"]
