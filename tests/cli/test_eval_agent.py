"""`toolkeeper eval agent`: the example task file, offline with its script and through the
real openai client against a local server, gives the figures its tasks were written for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.cli import main
from toolkeeper.eval.agent_eval import load_script
from toolkeeper.eval.agent_metrics import AgentTask
from toolkeeper.testing import Reply, VendorServer

EXAMPLES = Path(__file__).parents[2] / "examples"
TASKS = str(EXAMPLES / "agent_tasks.json")
SCRIPT = EXAMPLES / "agent_script.json"

# What the example's script does: every expected tool called (4 of 4); one add_note with a
# wrong argument name (5 of 6 valid); one list_notes the task did not ask for (1 of 6); greet
# answers without "hello" (4 of 5 done); three tasks granted notes:* are offered a write or
# destructive tool they do not need (3 of 5); no forbidden tool called (0 of 2).
FIGURES = {
    "tool_selection_accuracy": (4, 4),
    "argument_validity": (5, 6),
    "argument_accuracy": (2, 2),
    "irrelevant_call_rate": (1, 6),
    "task_success_rate": (4, 5),
    "unsafe_exposure_rate": (3, 5),
    "forbidden_call_rate": (0, 2),
}


def figures(report: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {k: (m["numerator"], m["denominator"]) for k, m in report["metrics"].items()}


def eval_agent(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["eval", "agent", "--tasks", TASKS, *argv, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_the_example_tasks_with_the_scripted_model(capsys: pytest.CaptureFixture[str]) -> None:
    report = eval_agent(capsys, "--model", f"scripted:{SCRIPT}")
    assert figures(report) == FIGURES
    rows = {r["id"]: r for r in report["runs"]}
    assert rows["clear-notes"]["calls"] == ["demo.clear_notes"]  # approved, ran once
    assert rows["greet"]["note"] == "the answer does not contain 'hello'"
    assert rows["add-note"]["exposed"] == ["demo.clear_notes"]
    assert report["steps"] == 11 and report["schema_tokens"]["per_step_max"] > 0


def test_the_same_tasks_through_the_real_openai_client(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = load_script(SCRIPT)
    tasks = {t["message"]: t["id"] for t in json.loads(Path(TASKS).read_text())["tasks"]}
    seen: list[list[str]] = []

    def reply(path: str, body: Any) -> Reply:
        assert path == "/v1/chat/completions"
        seen.append([t["function"]["name"] for t in body.get("tools", [])])
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        model = scripts(AgentTask(id=tasks[user], message=user))
        return Reply(body=model.completion(body["messages"]))

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with VendorServer(reply) as server:
        report = eval_agent(capsys, "--model", "openai:scripted", "--base-url", f"{server.url}/v1")
    assert figures(report) == FIGURES
    assert len(seen) == report["steps"] == 11
    assert seen[2] == ["demo_list_notes"]  # (list-notes is granted notes:read only)


def test_a_task_file_without_tools_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "message": "hi"}\n')
    code = main(["eval", "agent", "--tasks", str(tasks), "--model", f"scripted:{SCRIPT}"])
    assert code == 2 and "--tools" in capsys.readouterr().err


def test_an_unknown_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "agent", "--tasks", TASKS, "--model", "nobody:x"]) == 2
    assert "nobody:x" in capsys.readouterr().err


def test_a_script_missing_a_task_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"add-note": ["ok"]}')
    assert main(["eval", "agent", "--tasks", TASKS, "--model", f"scripted:{script}"]) == 2
    assert "list-notes" in capsys.readouterr().err


def test_the_table_names_each_metric(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "agent", "--tasks", TASKS, "--model", f"scripted:{SCRIPT}"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("unsafe exposure rate"))
    assert line.split()[-2:] == ["0.600", "3/5"]
    assert "greet" in out


def test_selecting_fewer_tools_shows_in_exposure_and_schema_tokens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    every = eval_agent(capsys, "--model", f"scripted:{SCRIPT}")
    one = eval_agent(capsys, "--model", f"scripted:{SCRIPT}", "--select-k", "1")
    assert figures(one)["unsafe_exposure_rate"] == (0, 5)
    assert one["schema_tokens"]["per_step_max"] < every["schema_tokens"]["per_step_max"]
