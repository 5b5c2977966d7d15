"""`toolkeeper demo --dir`: a folder it cannot run in is an error naming why, not a
traceback."""

from pathlib import Path

import pytest

from toolkeeper.cli import main


def test_a_folder_whose_digest_key_is_broken_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "toolkeeper.db.key"
    key.write_text("")  # (a write cut short, or a file made by hand)
    assert main(["demo", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(key) in err and "Traceback" not in err
