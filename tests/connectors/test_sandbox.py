"""Sandboxed programs and stdio upstreams cannot reach the gateway's secrets, files or network.

Each attack is run twice: unsandboxed it succeeds (so the test can fail), sandboxed it fails.
The gateway here is this test process; its configuration file sits in a folder of its own.
"""

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import CallStatus, Effect, Keeper, ToolCall, ToolResult, ToolSpec
from toolkeeper.catalog.registry import Tool
from toolkeeper.connectors._argv import schema_for
from toolkeeper.connectors.command import CommandConnector, CommandParams
from toolkeeper.connectors.mcp import McpUpstream, ToolOverride, UpstreamParams
from toolkeeper.connectors.sandbox import Sandbox

from ..conftest import APP

pytestmark = pytest.mark.anyio

HOSTILE = str(Path(__file__).with_name("hostile_upstream.py"))
GATEWAY_ENVIRON = f"/proc/{os.getpid()}/environ"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / "toolkeeper.toml"
    path.write_text('[principals.alice]\ntoken = "alice-secret-token-0123"\n')
    (folder / "ledger.db").write_text("ledger-row-of-bob")
    return path


async def _run(
    argv: tuple[Any, ...], arguments: Mapping[str, Any], sandbox: Sandbox | None
) -> ToolResult:
    connector = CommandConnector(CommandParams(argv=argv, sandbox=sandbox))
    spec = ToolSpec(name="cli.run", input_schema=schema_for(argv), effect=Effect.READ_ONLY)
    async with Keeper(ledger="memory://", principal=APP) as keeper:
        keeper.add(Tool(spec=spec, connector=connector))
        call = ToolCall(call_id="c1", name="cli.run", arguments=dict(arguments))
        return await keeper.execute(call)


@pytest.mark.parametrize("sandboxed", [False, True])
async def test_a_sandboxed_program_cannot_read_the_gateways_environ_config_or_ledger(
    config_file: Path, sandboxed: bool
) -> None:
    argv = ("cat", "{environ}", "{config}", "{ledger}")
    ledger = str(config_file.with_name("ledger.db"))
    arguments = {"environ": GATEWAY_ENVIRON, "config": str(config_file), "ledger": ledger}
    result = await _run(argv, arguments, Sandbox() if sandboxed else None)
    if not sandboxed:
        assert result.status is CallStatus.SUCCEEDED
        assert "PATH=" in result.data["stdout"] and "alice-secret" in result.data["stdout"]
        assert "ledger-row-of-bob" in result.data["stdout"]
        return
    assert result.status is CallStatus.FAILED  # cat: no such file, three times
    assert result.error is not None
    stderr = result.error.details["stderr"]
    assert "PATH=" not in stderr and "alice-secret" not in stderr
    assert stderr.count("No such file") == 3


@pytest.mark.parametrize("sandboxed", [False, True])
async def test_a_sandboxed_program_cannot_reach_the_network(sandboxed: bool) -> None:
    with socket.socket() as listener:  # (a connection completes in the backlog)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        argv = ("bash", "-c", "echo hi > /dev/tcp/127.0.0.1/$0", "{port}")
        result = await _run(argv, {"port": str(port)}, Sandbox() if sandboxed else None)
    assert (result.status is CallStatus.SUCCEEDED) is not sandboxed


async def test_a_sandboxed_program_may_write_its_work_directory_only(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    script = "touch ./made; touch $0/escaped; touch /usr/escaped; true"
    result = await _run(
        ("sh", "-c", script, "{outside}"), {"outside": str(outside)}, Sandbox(writable=str(work))
    )
    assert result.status is CallStatus.SUCCEEDED
    assert (work / "made").exists()
    assert not (outside / "escaped").exists()
    assert "Read-only file system" in result.data["stderr"]


async def test_a_sandboxed_program_sees_no_process_but_its_own() -> None:
    result = await _run(("sh", "-c", "ls /proc | grep -c '^[0-9]'"), {}, Sandbox())
    assert int(result.data["stdout"]) <= 4  # bubblewrap's init, sh, ls, grep


async def _upstream_read(path: str, sandbox: Sandbox | None) -> Any:
    params = UpstreamParams(
        name="hostile",
        command=sys.executable,
        args=(HOSTILE,),
        protocol="legacy",
        tools={"read": ToolOverride(effect=Effect.READ_ONLY)},
        sandbox=sandbox,
    )
    keeper = Keeper(ledger="memory://", principal=APP)
    async with keeper, McpUpstream(params, keeper.catalog) as upstream:
        assert upstream.connected
        call = ToolCall(call_id="r1", name="hostile.read", arguments={"path": path})
        result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED
    return result.data


@pytest.mark.parametrize("sandboxed", [False, True])
async def test_a_hostile_sandboxed_upstream_cannot_read_the_gateways_secrets(
    config_file: Path, sandboxed: bool
) -> None:
    sandbox = Sandbox(read_only=(HOSTILE,)) if sandboxed else None
    environ = str(await _upstream_read(GATEWAY_ENVIRON, sandbox))
    config = str(await _upstream_read(str(config_file), sandbox))
    if sandboxed:
        assert "PATH=" not in environ and "could not read" in environ
        assert "alice-secret" not in config and "could not read" in config
    else:
        assert "PATH=" in environ
        assert "alice-secret" in config
