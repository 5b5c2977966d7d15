"""Several processes racing to claim one call: exactly one of them wins, on each backend
that several processes can share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import postgres_url

CHILD = Path(__file__).with_name("claim_on_go.py")


def _race(*args: str, processes: int = 4) -> list[str]:
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outcomes = []
        for child in children:
            out, _ = child.communicate(timeout=60)
            assert child.returncode == 0
            outcomes.append(out.strip())
        return outcomes
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_processes_racing_on_one_sqlite_file_claim_exactly_once(tmp_path: Path) -> None:
    outcomes = _race(f"sqlite:///{tmp_path / 'ledger.db'}")
    assert sorted(outcomes) == ["lost", "lost", "lost", "won"]


@pytest.mark.postgres
def test_processes_racing_on_postgres_claim_exactly_once(pg_schema: str) -> None:
    outcomes = _race(postgres_url(), pg_schema)
    assert sorted(outcomes) == ["lost", "lost", "lost", "won"]
