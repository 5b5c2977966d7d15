"""Programs run as tools: argv items from arguments (no shell), environment, exit status."""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import CallStatus, Effect, ErrorCode, Keeper, ToolCall, ToolResult, ToolSpec
from toolkeeper.catalog.registry import Tool
from toolkeeper.connectors._argv import schema_for
from toolkeeper.connectors.command import CommandConnector, CommandParams
from toolkeeper.core.errors import ConfigurationError

from ..conftest import APP

pytestmark = pytest.mark.anyio


async def _run(
    argv: tuple[Any, ...],
    arguments: Mapping[str, Any] | None = None,
    *,
    seconds: float = 10.0,
    effect: Effect = Effect.READ_ONLY,
    **options: Any,
) -> ToolResult:
    connector = CommandConnector(CommandParams(argv=argv, **options))
    spec = ToolSpec(name="cli.run", input_schema=schema_for(argv), effect=effect, timeout=seconds)
    async with Keeper(ledger="memory://", principal=APP) as keeper:
        keeper.add(Tool(spec=spec, connector=connector))
        return await keeper.execute(
            ToolCall(call_id="c1", name="cli.run", arguments=arguments or {})
        )


async def test_each_value_is_one_argument_however_it_is_spelled() -> None:
    hostile = "a b; rm -rf / $(id) `id` 'q' \"d\" > out"
    result = await _run(("printf", "%s\\n", "{text}"), {"text": hostile})
    assert result.status is CallStatus.SUCCEEDED
    assert result.data["stdout"] == hostile + "\n"


async def test_a_list_argument_is_one_item_per_element_and_a_group_needs_its_arguments() -> None:
    argv = ("printf", "[%s]", "{files}", ["--limit", "{n}"], ["-v", "{verbose}"])
    schema = {
        "type": "object",
        "properties": {
            "files": {"type": "array", "items": {"type": "string"}},
            "n": {"type": "integer"},
            "verbose": {"type": "boolean"},
        },
    }
    connector = CommandConnector(CommandParams(argv=argv))
    spec = ToolSpec(name="cli.run", input_schema=schema, effect=Effect.READ_ONLY)
    async with Keeper(ledger="memory://", principal=APP) as keeper:
        keeper.add(Tool(spec=spec, connector=connector))
        full = await keeper.execute(
            ToolCall(
                call_id="a",
                name="cli.run",
                arguments={"files": ["x y", "z"], "n": 3, "verbose": True},
            )
        )
        bare = await keeper.execute(
            ToolCall(call_id="b", name="cli.run", arguments={"files": ["z"], "verbose": False})
        )
    assert full.data["stdout"] == "[x y][z][--limit][3][-v]"
    assert bare.data["stdout"] == "[z]"


async def test_a_value_that_would_read_as_an_option_is_refused_before_it_runs(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    result = await _run(("touch", str(marker), "{name}"), {"name": "--help"})
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert not marker.exists()
    (tmp_path / "-n").write_text("a file named -n")
    after_dashes = await _run(("cat", "--", "{name}"), {"name": "-n"}, cwd=str(tmp_path))
    assert after_dashes.data["stdout"] == "a file named -n"


async def test_the_program_gets_only_the_allowed_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TK_ALLOWED", "yes")
    monkeypatch.setenv("TK_SECRET", "never-shown")
    result = await _run(("env",), env_allow=("TK_ALLOWED",), env={"OWN": "1"})
    lines = set(result.data["stdout"].splitlines())
    assert {"TK_ALLOWED=yes", "OWN=1"} <= lines
    assert not any(line.startswith("TK_SECRET") for line in lines)


async def test_the_program_runs_in_its_working_directory(tmp_path: Path) -> None:
    result = await _run(("pwd",), cwd=str(tmp_path))
    assert result.data["stdout"].strip() == str(tmp_path)


async def test_an_exit_status_becomes_its_configured_code() -> None:
    argv = ("sh", "-c", "echo bad input >&2; exit 2")
    refused = await _run(argv, exit_codes={2: ErrorCode.INVALID_ARGUMENTS})
    assert refused.error is not None and refused.error.code is ErrorCode.INVALID_ARGUMENTS
    assert refused.error.details == {"exit_code": 2, "stderr": "bad input\n"}
    other = await _run(("sh", "-c", "exit 3"))
    assert other.error is not None and other.error.code is ErrorCode.TOOL_ERROR
    killed = await _run(("sh", "-c", "kill -9 $$"))
    assert killed.error is not None and killed.error.details["exit_code"] == -9


def test_an_exit_code_only_the_pipeline_says_is_refused() -> None:
    with pytest.raises(ValueError, match="only the pipeline"):
        CommandConnector(CommandParams(argv=("true",), exit_codes={1: ErrorCode.TIMEOUT}))


def test_a_program_not_on_the_path_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        CommandConnector(CommandParams(argv=("no-such-program-tk",)))


async def test_output_past_the_cap_is_cut_and_said_so() -> None:
    result = await _run(("head", "-c", "100000", "/dev/zero"), max_output_bytes=1000)
    assert result.status is CallStatus.SUCCEEDED
    assert len(result.data["stdout"]) == 1000 and result.data["truncated"] is True


async def test_json_output_is_the_result() -> None:
    result = await _run(("printf", '{"lines": 3}'), output="json")
    assert result.data == {"lines": 3}


async def test_the_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    with anyio.fail_after(10):
        result = await _run(("sh", "-c", script), seconds=1.0)
    assert result.error is not None and result.error.code is ErrorCode.TIMEOUT
    await _ended(int(pidfile.read_text()))


async def test_what_a_program_leaves_behind_is_killed_when_it_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    script = f"sleep 60 & echo $! > {pidfile}"
    with anyio.fail_after(10):  # (the child holds stdout open: its end is what ends the read)
        result = await _run(("sh", "-c", script))
    assert result.status is CallStatus.SUCCEEDED
    await _ended(int(pidfile.read_text()))


async def _ended(pid: int) -> None:
    """Wait until process `pid` has ended (its pidfd turns readable); fails after 5 s."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(5):
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)


async def test_an_argument_the_system_cannot_pass_fails_before_the_program_runs() -> None:
    result = await _run(("printf", "%s", "{text}"), {"text": "x" * 200_000})
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert result.attempt == 1  # (not retried: it would fail the same way)


async def test_concurrent_calls_each_get_their_own_output() -> None:
    connector = CommandConnector(CommandParams(argv=("printf", "%s", "{text}")))
    spec = ToolSpec(name="cli.run", input_schema=schema_for(("{text}",)), effect=Effect.READ_ONLY)
    results: dict[int, ToolResult] = {}
    async with Keeper(ledger="memory://", principal=APP) as keeper:
        keeper.add(Tool(spec=spec, connector=connector))

        async def one(i: int) -> None:
            call = ToolCall(call_id=f"c{i}", name="cli.run", arguments={"text": f"n{i}"})
            results[i] = await keeper.execute(call)

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(one, i)
    assert [results[i].data["stdout"] for i in range(10)] == [f"n{i}" for i in range(10)]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_a_program_runs_and_times_out_on_trio_too(tmp_path: Path) -> None:
    done = await _run(("printf", "%s", "{text}"), {"text": "on trio"})
    assert done.data["stdout"] == "on trio"
    pidfile = tmp_path / "child"
    with anyio.fail_after(10):
        late = await _run(("sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"), seconds=0.5)
    assert late.error is not None and late.error.code is ErrorCode.TIMEOUT
    await _ended(int(pidfile.read_text()))
