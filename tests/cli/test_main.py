"""What every command shares: how it ends when stopped (Ctrl-C, a reader that goes away),
how options are placed, and help for each option."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeeper.cli import _parser, main

CLI = "from toolkeeper.cli import main; raise SystemExit(main())"


def test_ctrl_c_exits_130_without_a_traceback() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(30)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/mcp"
        command = [sys.executable, "-c", CLI, "list-tools", "--url", url]
        # Started as a terminal starts a command: a shell runs a background job (a test run
        # under `nohup make test &`, say) with Ctrl-C ignored, and its children inherit that.
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            connection, _ = server.accept()  # the command is running: it waits for an answer
            with connection:
                process.send_signal(signal.SIGINT)
                _, err = process.communicate(timeout=30)
        finally:  # (a command that did not stop fails this test, not the next one's warnings)
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 130
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    tools = tmp_path / "tools.jsonl"
    definition = {"name": "t", "description": "d" * 1000, "parameters": {"type": "dict"}}
    # far more than a pipe holds, so the command is still writing when the reader goes away
    tools.write_text(
        "".join(json.dumps(definition | {"name": f"t{i}"}) + "\n" for i in range(500)),
        encoding="utf-8",
    )
    command = [sys.executable, "-c", CLI, "dialects", "convert", "--from", "bfcl", "--to", "all"]
    process = subprocess.Popen(
        [*command, str(tools)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith(b"{")  # like `| head -1`
    process.stdout.close()
    err = process.stderr.read()
    process.wait(timeout=30)
    process.stderr.close()
    assert process.returncode == 141
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


def test_an_option_before_the_command_says_where_it_goes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--ledger", "x.db", "ledger", "list"])
    assert exit_info.value.code == 2
    assert "--ledger is an option of a command: put it after the command" in (
        capsys.readouterr().err
    )


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.format_help()  # loads a benchmark's options
                yield from _parsers(sub)


def test_every_option_and_argument_says_what_it_is_for() -> None:
    undocumented = [
        f"{parser.prog} {action.option_strings or action.dest}"
        for parser in _parsers(_parser(None, every=True))
        for action in parser._actions
        if action.help is None and not isinstance(action, argparse._SubParsersAction)
    ]
    assert undocumented == []


def test_toolkeeper_help_names_every_action_of_each_command() -> None:
    # `toolkeeper --help` is where a newcomer learns that `ledger settle` or `eval abstain` exist
    top = _parser(None, every=True)
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {choice.dest: choice.help or "" for choice in commands._choices_actions}
    unnamed = [
        f"{name} {action}"
        for name, sub in commands.choices.items()
        for group in sub._actions
        if isinstance(group, argparse._SubParsersAction)
        for action in group.choices
        if action not in summaries[name]
    ]
    assert unnamed == []


def test_a_broken_pipe_that_is_not_stdout_is_an_error_not_a_quiet_exit() -> None:
    # A command writing to a child process that died: stdout is fine, the failure is real.
    code = (
        "import subprocess, toolkeeper.cli.dialects as d\n"
        "def writes_to_a_dead_child(args):\n"
        "    child = subprocess.Popen(['true'], stdin=subprocess.PIPE)\n"
        "    child.wait()\n"
        "    child.stdin.write(b'x' * 1_000_000)\n"
        "    child.stdin.flush()\n"
        "d._run = writes_to_a_dead_child\n"
        f"{CLI}\n"
    )
    command = [sys.executable, "-c", code, "dialects", "convert", "--from", "bfcl", "--to", "all"]
    done = subprocess.run([*command, "-"], input="", capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "BrokenPipeError" in done.stderr


def test_python_dash_m_toolkeeper_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("toolkeeper ")
