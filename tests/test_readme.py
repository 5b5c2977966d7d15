"""The README's quickstart runs as written (tests/test_docs_code.py runs it from a shell)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_quickstart_runs_and_runs_again_on_the_same_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = r"## Quickstart.*?```python file=quickstart.py\n(.*?)```"
    code = re.search(found, README.read_text(), re.S)
    assert code is not None
    quickstart = compile(code.group(1), str(README), "exec")
    monkeypatch.chdir(tmp_path)
    exec(quickstart, {"__name__": "__main__"})
    first = capsys.readouterr().out.splitlines()
    assert first[0] == "AWAITING_APPROVAL APPROVAL_REQUIRED"
    assert first[2] == "True"
    assert (tmp_path / "toolkeeper.db").exists()
    assert (tmp_path / "toolkeeper.audit.jsonl").exists()
    # as the README says: the second run replays the recorded call, asking nobody
    exec(quickstart, {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines() == first[1:]


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text().split("## ")[0]
    assert "make run" in head and "make test" in head
