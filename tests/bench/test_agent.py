"""`toolkeeper bench agent`: every loop finishes the scripted run through the real openai
client, and the report says the ratios and the bytes a paused run stores."""

import pytest

from toolkeeper.bench.agent import STEPS, bench_agent, render_agent


@pytest.mark.slow  # (four agent loops, imported and run through one local server)
def test_the_agent_bench_runs_every_loop_and_reports_a_paused_run() -> None:
    pytest.importorskip("pydantic_ai")
    pytest.importorskip("agents")
    report = bench_agent(runs=1, repeats=1)
    assert set(report["per_step"]) == {
        "toolkeeper.memory",
        "toolkeeper.sqlite",
        "pydantic_ai",
        "openai_agents",
    }
    assert all(s["failures"] == 0 and s["calls"] == 1 for s in report["per_step"].values())
    assert report["ratio_to_pydantic_ai"]["pydantic_ai"] == 1.0
    assert 1_000 < report["paused_run_bytes"] < 20_000
    assert report["steps"] == STEPS
    assert "stores" in render_agent(report)
