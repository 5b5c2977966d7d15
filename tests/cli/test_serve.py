"""`toolkeeper serve` and `toolkeeper list-tools` as a person runs them."""

from __future__ import annotations

import contextlib
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.abc import Process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolkeeper.cli import main

from ..conftest import MCP_INITIALIZE

ROOT = Path(__file__).resolve().parents[2]
CLI = "from toolkeeper.cli import main; raise SystemExit(main())"


def test_a_configuration_error_exits_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[server]\nport = "eighty"\n')
    assert main(["serve", "--config", str(config)]) == 2
    assert f"{config}:2: server.port:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('file = "no_such_tools.py"', ":4: tools.0.file: no such file:"),
        ('module = "no_such_module_xyz"', ": tools[0] (no_such_module_xyz): no module named"),
    ],
)
def test_a_tool_module_that_cannot_be_loaded_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str, message: str
) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n[[tools]]\n{entry}\n')
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"toolkeeper serve: {config}") and message in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_a_port_in_use_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "gw.toml"
        config.write_text(f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\nport = {port}\n')
        assert main(["serve", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert f"toolkeeper serve: cannot serve on 127.0.0.1:{port}" in err
    assert "Traceback" not in err


@contextlib.asynccontextmanager
async def _serving(
    tmp_path: Path, server: str = "", tables: str = ""
) -> AsyncIterator[tuple[Process, list[str]]]:
    """`toolkeeper serve` on the demo tools, once it has printed its banner; `server`: more
    keys of `[server]`; `tables`: more tables."""
    config = tmp_path / "gw.toml"
    config.write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\nport = 0\n{server}'
        f'[[tools]]\nfile = "{ROOT / "examples" / "demo_tools.py"}"\n'
        '[principals.demo]\ntoken = "demo-token-for-tests"\ngrants = ["notes:*"]\n' + tables
    )
    command = [sys.executable, "-c", CLI, "serve", "--config", str(config), "--show-tokens"]
    async with await anyio.open_process(command) as process:
        try:
            assert process.stdout is not None
            with anyio.fail_after(60):
                buffer = b""
                async for chunk in process.stdout:
                    buffer += chunk
                    if b"list its tools: " in buffer and buffer.endswith(b"\n"):
                        break
            yield process, buffer.decode().splitlines()
        finally:
            if process.returncode is None:
                process.terminate()


def _probe(lines: list[str]) -> list[str]:
    """The argv of the command the banner prints to list tools."""
    probe = next(line for line in lines if line.startswith("list its tools: "))
    return shlex.split(probe.removeprefix("list its tools: "))


@pytest.mark.anyio
async def test_serve_prints_url_token_and_a_command_that_lists_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with _serving(tmp_path) as (_, lines):
        argv = _probe(lines)
        assert Path(argv[0]).name == "toolkeeper"
        code = await anyio.to_thread.run_sync(main, argv[1:])
        wrong = [*argv[1:-1], "not-the-token"]
        refused = await anyio.to_thread.run_sync(main, wrong)
        url = argv.index("--url") + 1
        pathless = [*argv[1:url], argv[url].removesuffix("/mcp"), *argv[url + 1 :]]
        unfound = await anyio.to_thread.run_sync(main, pathless)
    assert any(line.startswith("toolkeeper gateway on http://127.0.0.1:") for line in lines)
    assert "principal demo: token demo-token-for-tests" in lines
    assert code == 0
    assert refused == 1
    assert unfound == 1
    captured = capsys.readouterr()
    assert "demo.add_note" in captured.out
    assert "401" in captured.err
    assert "answered 404: name the gateway's MCP endpoint" in captured.err  # (not "Not Found")


@pytest.mark.anyio
async def test_serve_prints_the_console_url_and_an_operator_token_that_opens_it(
    tmp_path: Path,
) -> None:
    import httpx2

    operators = '[operators.ops]\ntoken = "ops-token-for-the-tests"\nrole = "admin"\n'
    async with _serving(tmp_path, tables=operators) as (_, lines):
        [console] = [line.split()[1] for line in lines if line.startswith("console: ")]
        headers = {"Authorization": "Bearer ops-token-for-the-tests"}
        async with httpx2.AsyncClient(headers=headers) as http:
            page = await http.get(f"{console}/login")
            health = await http.get(console.removesuffix("/console") + "/api/v1/health")
    assert console.startswith("http://127.0.0.1:") and console.endswith("/console")
    assert "operator ops (admin): token ops-token-for-the-tests" in lines
    assert page.status_code == 200 and health.json()["ledger"] == "ok"


_DEMO_HEADERS = {
    "Authorization": "Bearer demo-token-for-tests",
    "Accept": "application/json, text/event-stream",
}
"""What the tests' demo client sends with each request."""


def _gateway_url(lines: list[str]) -> str:
    """The gateway's URL, from the line `serve` prints it on."""
    return next(line for line in lines if line.startswith("toolkeeper gateway on ")).split()[-1]


@pytest.mark.anyio
async def test_serve_takes_the_host_names_the_configuration_allows_and_no_others(
    tmp_path: Path,
) -> None:
    allowed = 'allowed_hosts = ["mcp.example.com"]\n'
    async with _serving(tmp_path, allowed) as (_, lines):
        url, headers = _gateway_url(lines), _DEMO_HEADERS
        async with httpx2.AsyncClient(timeout=30) as http:
            named, other = [
                await http.post(url, json=MCP_INITIALIZE, headers={**headers, "Host": host})
                for host in ("mcp.example.com", "evil.example")
            ]
    assert (named.status_code, other.status_code) == (200, 421)


@pytest.mark.anyio
async def test_serve_caps_sessions_per_principal_and_cuts_off_a_silent_connection(
    tmp_path: Path,
) -> None:
    # (a request deadline a busy machine meets: 0.3 s cut off the client's initialize)
    limits = "max_sessions_per_principal = 1\nrequest_timeout = 2\n"
    async with _serving(tmp_path, limits) as (_, lines):
        url, headers = _gateway_url(lines), _DEMO_HEADERS
        async with httpx2.AsyncClient(timeout=30) as http:
            first, second = [
                await http.post(url, json=MCP_INITIALIZE, headers=headers) for _ in range(2)
            ]
        port = int(url.split(":")[2].split("/")[0])
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as silent:
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await silent.receive()  # closed by the gateway, having sent nothing
    assert (first.status_code, second.status_code) == (200, 429)


@pytest.mark.anyio
async def test_ctrl_c_stops_the_gateway_cleanly_with_every_call_recorded(tmp_path: Path) -> None:
    async with _serving(tmp_path) as (process, lines):
        argv = _probe(lines)
        called = await anyio.to_thread.run_sync(main, [*argv[1:], "--call", "demo.list_notes"])
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(30):
            code = await process.wait()
        assert process.stderr is not None
        errors = b"".join([chunk async for chunk in process.stderr]).decode()
    assert called == 0
    assert code == 0
    assert "Traceback" not in errors
    with sqlite3.connect(tmp_path / "l.db") as ledger:
        assert ledger.execute("SELECT tool, status FROM calls").fetchall() == [
            ("demo.list_notes", "SUCCEEDED")
        ]


@pytest.mark.anyio
async def test_ctrl_c_stops_the_gateway_while_a_client_listens_for_tool_changes(
    tmp_path: Path,
) -> None:
    """A 2026-era client keeps a `subscriptions/listen` stream open for as long as it is
    connected: the gateway waited for it, and did not stop at SIGINT or SIGTERM."""
    async with _serving(tmp_path) as (process, lines):
        url = next(line for line in lines if line.startswith("toolkeeper gateway on "))
        headers = {"Authorization": "Bearer demo-token-for-tests"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as http,
            Client(streamable_http_client(url.split()[-1], http_client=http)) as client,  # type: ignore[arg-type]
            client.listen(tools_list_changed=True),
        ):
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(20):
                code = await process.wait()
        assert process.stderr is not None
        errors = b"".join([chunk async for chunk in process.stderr]).decode()
    assert code == 0
    assert "Traceback" not in errors


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--ledger", "postgresql://nobody@127.0.0.1:1/x"], 1, "cannot connect to the PostgreSQL"),
        (["--ledger", "sqlite:///{tmp}"], 1, "cannot open the SQLite ledger"),
        (["--port", "70000"], 2, "'70000' is not a port"),
        # No URL holds these hosts: the gateway failed building its own with a traceback.
        (["--host", "999.1.1.1"], 2, "'999.1.1.1' is not an IP address or a host name"),
        (["--host", "http://127.0.0.1"], 2, "is not an IP address or a host name"),
        (["--host", ""], 2, "'' is not an IP address or a host name"),
    ],
)
def test_a_ledger_that_cannot_open_or_a_bad_port_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    config = tmp_path / "gw.toml"
    config.write_text("[server]\nport = 0\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]  # a folder is no database
    try:
        result = main(["serve", "--config", str(config), *argv])
    except SystemExit as exit_:  # argparse refuses the value
        result = exit_.code  # type: ignore[assignment]
    assert result == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_list_tools_args_without_a_call_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list-tools", "--url", "http://127.0.0.1:9/mcp", "--args", '{"a": 1}']) == 2
    assert "--args goes with --call" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "blocked", "extra"),
    [
        (["serve", "--config", "gw.toml"], "mcp", '"toolkeeper[server]"'),
        (["list-tools", "--url", "http://127.0.0.1:9/mcp"], "httpx2", '"toolkeeper[mcp]"'),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(
    command: list[str], blocked: str, extra: str
) -> None:
    # as if `pip install toolkeeper` had been run without the extra: its module is not there
    code = f"import sys; sys.modules[{blocked!r}] = None\n" + CLI
    done = subprocess.run(
        [sys.executable, "-c", code, *command], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert extra in done.stderr


def test_list_tools_names_the_url_it_could_not_reach(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"
    assert main(["list-tools", "--url", url]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"toolkeeper list-tools: cannot reach {url}: ")


@pytest.mark.anyio
async def test_list_tools_suggests_the_tools_a_mistyped_call_may_have_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with _serving(tmp_path) as (_, lines):
        argv = [*_probe(lines)[1:], "--call", "demo.add_nte", "--args", '{"text": "x"}']
        code = await anyio.to_thread.run_sync(main, argv)
    assert code == 1
    assert "Unknown tool: demo.add_nte (did you mean 'demo.add_note'" in capsys.readouterr().err
