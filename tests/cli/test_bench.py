"""`toolkeeper bench`: lazily loaded benchmarks; `bench executor --json` prints its report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper.cli import main


def test_bench_executor_json_prints_one_object_with_cases_ratios_and_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "executor", "--json", "--calls", "10", "--repeats", "1", "--warmup", "1"]
    assert main([*argv, "--dir", str(tmp_path)]) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["bench"] == "executor"
    assert report["cases"]["toolkeeper.memory"]["calls"] == 10
    assert {"ratios", "targets", "targets_met", "all_calls_succeeded"} <= set(report)
    assert report["all_calls_succeeded"] is True


def test_bench_executor_prints_tables_without_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "executor", "--calls", "5", "--repeats", "1", "--warmup", "1"]
    assert main([*argv, "--dir", str(tmp_path)]) == 0

    out = capsys.readouterr().out
    assert "(a) toolkeeper read_only, memory ledger" in out
    assert "(c) write, SQLite ledger: median <= 300 us" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["executor", "--calls", "0"],
        ["retrieval", "--tools", "0"],
        ["retrieval", "--k", "0"],
        ["retrieval", "--queries", "-1"],
        ["gateway", "--calls", "0"],
        ["gateway", "--repeats", "0"],
    ],
)
def test_a_non_positive_count_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *argv])
    assert exit_info.value.code == 2
    assert f"argument {argv[1]}: expected a count of 1 or more" in capsys.readouterr().err


def test_a_file_given_as_the_ledger_folder_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "ledger.db"
    taken.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "executor", "--dir", str(taken)])
    assert exit_info.value.code == 2
    assert f"argument --dir: {taken} is a file, not a folder" in capsys.readouterr().err


def test_bench_help_lists_benchmarks_without_importing_them() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from toolkeeper.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(['bench', '--help'])\n"
        "print('executor' in out.getvalue(), 'toolkeeper.bench' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]
