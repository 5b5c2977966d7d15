"""The integrations bench times each framework's native tool next to the keeper's, and
counts a run whose tool output is wrong as failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.bench.integrations import report, run_integrations_bench

for _framework in ("pydantic_ai", "agents", "langchain_core"):
    pytest.importorskip(_framework)

pytestmark = pytest.mark.anyio


async def test_every_framework_case_runs_and_hands_the_model_the_tool_output(
    tmp_path: Path,
) -> None:
    results = await run_integrations_bench(runs=2, repeats=1, root=tmp_path)
    assert sorted(results) == ["langchain", "openai-agents", "pydantic-ai"]
    for cases in results.values():
        assert sorted(cases) == ["keeper memory", "keeper sqlite", "native"]
        assert all(s.calls == 2 and s.failures == 0 for s in cases.values())
    rows = report(results)
    assert rows["langchain"]["native"]["cpu_ratio"] == 1.0
    assert (tmp_path / "bench.db").exists()
