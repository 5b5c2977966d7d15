"""`toolkeeper --help`, and each command's, is quick: it imports no heavy module.

Not timed (timings are noisy under load; `toolkeeper` start-up is measured by hand): each
`--help` runs in a fresh interpreter, which then names the modules it imported.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from toolkeeper.cli import _HELP, _parser
from toolkeeper.cli._bench_options import BENCHES

HEAVY = frozenset(
    {
        # optional extras
        "anthropic",
        "fastmcp",
        "httpx",
        "httpx2",
        "jinja2",
        "matplotlib",
        "mcp",
        "numpy",
        "onnxruntime",
        "openai",
        "opentelemetry",
        "psycopg",
        "redis",
        "starlette",
        "tantivy",
        "tokenizers",
        "uvicorn",
        # the runtime's own dependencies: a command's body needs them, its help does not
        "jsonschema_rs",
        "pydantic",
        "sqlite3",
    }
)
"""Top-level modules no `--help` imports."""


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    yield " ".join(prefix)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*prefix, name))


COMMANDS = list(_commands(_parser(None, every=True)))

_IMPORTED = (
    "import sys\n"
    "from toolkeeper.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c or "toolkeeper")
def test_help_imports_no_heavy_module(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *command.split(), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "usage: toolkeeper" in out.stdout
    assert sorted(HEAVY & set(out.stderr.split())) == []


def test_toolkeeper_help_imports_no_command() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTED.replace("m.split('.')[0]", "m"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = out.stderr.split()
    assert [m for m in imported if m.startswith("toolkeeper.") and m != "toolkeeper.cli"] == []


def test_toolkeeper_help_shows_each_command_as_its_module_describes_it() -> None:
    for command, text in _HELP.items():
        commands = next(
            a for a in _parser(command)._actions if isinstance(a, argparse._SubParsersAction)
        )
        described = {choice.dest: choice.help for choice in commands._choices_actions}
        assert described[command] == text


def test_the_defaults_help_shows_are_the_runtime_s() -> None:
    from toolkeeper.cli import dialects, eval
    from toolkeeper.dialects import DIALECTS, IMPORTERS
    from toolkeeper.retrieval import adapter

    assert tuple(DIALECTS) == dialects.DIALECTS
    assert tuple(IMPORTERS) == dialects.IMPORTERS
    assert (eval.EPOCHS, eval.ABSTAIN_WEIGHT) == (adapter.EPOCHS, adapter.ABSTAIN_WEIGHT)


def _bench_defaults(what: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    BENCHES[what][0](parser)
    return vars(parser.parse_args([]))


def test_each_benchmark_s_options_default_to_its_own_defaults() -> None:
    from toolkeeper.bench import agent, executor, scale
    from toolkeeper.server import console_bench

    ran = _bench_defaults("executor")
    assert (ran["calls"], ran["repeats"], ran["warmup"]) == (
        executor.DEFAULT_CALLS,
        executor.DEFAULT_REPEATS,
        executor.DEFAULT_WARMUP,
    )
    ran = _bench_defaults("agent")
    assert (ran["runs"], ran["repeats"]) == (agent.DEFAULT_RUNS, agent.DEFAULT_REPEATS)
    ran = _bench_defaults("scale")
    assert (ran["calls"], ran["budget"], ran["budget_calls"], ran["pool_size"]) == (
        scale.DEFAULT_CALLS,
        scale.DEFAULT_BUDGET,
        scale.DEFAULT_BUDGET_CALLS,
        scale.DEFAULT_POOL_SIZE,
    )
    if "TOOLKEEPER_BENCH_POSTGRES" not in os.environ:
        assert ran["postgres"] == scale.DEFAULT_POSTGRES == console_bench.DEFAULT_POSTGRES
        assert _bench_defaults("console")["postgres"] == console_bench.DEFAULT_POSTGRES
    if "TOOLKEEPER_BENCH_REDIS" not in os.environ:
        assert ran["redis"] == scale.DEFAULT_REDIS


@pytest.mark.parametrize("what", sorted(BENCHES))
def test_each_benchmark_runs_a_command_its_module_has(what: str) -> None:
    run = _bench_defaults(what)["func"]
    assert isinstance(run, functools.partial)
    module, _, function = run.args[0].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        (["lgder", "list"], "'ledger'"),
        (["ledger", "lst"], "'list'"),
        (["bench", "executr"], "'executor'"),
    ],
)
def test_a_mistyped_command_gets_the_close_ones_suggested(
    argv: list[str], suggested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolkeeper.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert f"did you mean {suggested}?" in capsys.readouterr().err
