"""examples/research_agent.py (docs/agent.md): the research scenario pauses for approval,
resumes in a new process and publishes exactly once."""

import importlib.util
import json
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "research_agent.py"


@pytest.mark.slow  # (three Python processes: the approval, and two resumes)
def test_the_research_run_pauses_resumes_in_a_new_process_and_publishes_once(
    tmp_path: Path,
) -> None:
    spec = importlib.util.spec_from_file_location("research_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    told = example.story(tmp_path)
    assert told["paused"]["status"] == "awaiting_approval"
    assert told["paused"]["calls"][-1] == ["publish_report", "AWAITING_APPROVAL"]
    assert told["resumed"]["status"] == told["again"]["status"] == "completed"
    assert [name for name, _ in told["resumed"]["calls"]] == [
        "search_web",
        "read_page",
        "write_report",
        "publish_report",
    ]
    assert {status for _, status in told["again"]["calls"]} == {"SUCCEEDED"}
    assert [json.loads(line) for line in told["published"]] == [{"report_id": "report-1"}]
