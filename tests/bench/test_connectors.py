"""The connectors benchmark on a tiny run: its report, not its speed (speed lives in the bench)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolkeeper.bench.connectors import run_connectors_bench

CASES = ["http.toolkeeper", "http.httpx2", "command.toolkeeper", "command.bare"]


@pytest.mark.anyio
async def test_a_tiny_run_checks_every_call_and_both_targets() -> None:
    report = await run_connectors_bench(calls=5, repeats=2, warmup=1)
    data = json.loads(json.dumps(report.to_dict()))
    assert report.all_calls_succeeded
    assert list(data["cases"]) == CASES
    for key in CASES:
        assert (data["cases"][key]["calls"], data["cases"][key]["failures"]) == (10, 0)
    assert set(data["targets"]) == {"http_ratio", "command_ratio"}
    assert all(t["measured"] > 0 for t in data["targets"].values())


def test_the_command_line_prints_json() -> None:
    command = [sys.executable, "-m", "toolkeeper", "bench", "connectors", "--json"]
    done = subprocess.run(
        [*command, "--calls", "2", "--repeats", "1", "--warmup", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout)["bench"] == "connectors"
