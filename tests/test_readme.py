"""The README's quickstart runs as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_quickstart_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = re.search(r"## Quickstart\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), str(README), "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "AWAITING_APPROVAL APPROVAL_REQUIRED"
    assert out[2] == "True"
    assert (tmp_path / "toolkeeper.db").exists()
    assert (tmp_path / "toolkeeper.audit.jsonl").exists()


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text().split("## ")[0]
    assert "make run" in head and "make test" in head
