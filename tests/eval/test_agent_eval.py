"""Task files and scripts are read strictly, and running them through the agent records what
each step offered, cost and did, every call through the keeper and its ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import Keeper
from toolkeeper.dialects import get_dialect
from toolkeeper.eval.agent_eval import (
    load_agent_tasks,
    load_script,
    register_tools,
    run_agent_tasks,
)
from toolkeeper.eval.agent_metrics import AgentTask, ExpectedCall, TaskRun
from toolkeeper.eval.datasets import DatasetError
from toolkeeper.testing import ScriptedModel, scripted_call

EXAMPLES = Path(__file__).parents[2] / "examples"


def write(tmp_path: Path, data: Any, name: str = "tasks.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_the_example_task_file_loads_with_its_tools_module() -> None:
    tasks, tools = load_agent_tasks(EXAMPLES / "agent_tasks.json")
    assert tools == (EXAMPLES / "demo_tools.py").resolve()
    assert [t.id for t in tasks][:2] == ["add-note", "list-notes"]
    assert tasks[0].expect == (ExpectedCall(tool="demo.add_note", arguments={"text": "buy milk"}),)
    assert tasks[3].approvals == "approve"


def test_json_lines_hold_one_task_a_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a", "message": "hi"}\n\n{"id": "b", "message": "yo", "grants": []}\n')
    tasks, tools = load_agent_tasks(path)
    assert tools is None
    assert [(t.id, t.grants) for t in tasks] == [("a", ("*",)), ("b", ())]


@pytest.mark.parametrize(
    "task",
    [
        {"id": "a"},
        {"id": "a", "message": "m", "expected": []},
        {"id": "a", "message": "m", "expect": [{"name": "x"}]},
        {"id": "a", "message": "m", "grants": "notes:*"},
        {"id": "a", "message": "m", "verify": {"output": "x"}},
        {"id": "a", "message": "m", "approvals": "yes"},
        {"id": "a", "message": "m", "verify": {"output_contains": 4}},
        {"id": "a", "message": "m", "verify": {"ledger": {"tool": "x", "count": "1"}}},
        {"id": "a", "message": "m", "verify": {"ledger": {"tool": "x", "status": "DONE"}}},
        {"id": "a", "message": "m", "verify": {"ledger": {"status": "FAILED"}}},
        "a task",
    ],
)
def test_a_malformed_task_is_refused_naming_it(tmp_path: Path, task: Any) -> None:
    with pytest.raises(DatasetError, match="task 1"):
        load_agent_tasks(write(tmp_path, {"tasks": [task]}))


@pytest.mark.parametrize(
    "data",
    [{"tasks": []}, [], {"tasks": [{"id": "a", "message": "m"}] * 2}, {"tasks": [], "tools": 1}],
)
def test_a_file_without_usable_tasks_is_refused(tmp_path: Path, data: Any) -> None:
    with pytest.raises(DatasetError):
        load_agent_tasks(write(tmp_path, data))


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text("{nope")
    with pytest.raises(DatasetError, match="not JSON"):
        load_agent_tasks(path)


def test_a_bad_line_of_json_lines_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a", "message": "hi"}\n{"id": \n')
    with pytest.raises(DatasetError, match=r"tasks\.jsonl:2"):
        load_agent_tasks(path)


def test_a_script_gives_each_task_its_own_turns(tmp_path: Path) -> None:
    turns = {"a": [{"call": "x", "arguments": {"k": 1}}, "done"], "b": ["hi"]}
    model = load_script(write(tmp_path, turns, "script.json"))
    first = model(AgentTask(id="a", message="m"))
    assert first.completion([])["choices"][0]["message"]["tool_calls"][0]["function"] == {
        "name": "x",
        "arguments": '{"k": 1}',
    }
    with pytest.raises(DatasetError, match="no turns for task 'c'"):
        model(AgentTask(id="c", message="m"))
    with pytest.raises(DatasetError):
        load_script(write(tmp_path, {"a": [42]}, "bad.json"))


def test_tools_come_from_a_file_defining_register(tmp_path: Path) -> None:
    keeper = Keeper()
    register_tools(keeper, EXAMPLES / "demo_tools.py")
    assert "demo.clear_notes" in keeper.catalog
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    from toolkeeper.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        register_tools(keeper, empty)
    with pytest.raises(ConfigurationError):
        register_tools(keeper, tmp_path / "missing.py")


def make_keeper(published: list[str]) -> Keeper:
    keeper = Keeper()

    @keeper.tool(name="docs.find", effect="read_only", permissions=["docs:read"])
    def find(query: str) -> str:
        """Find a document."""
        return f"found {query}"

    @keeper.tool(name="docs.publish", effect="destructive", permissions=["docs:write"])
    def publish(title: str) -> str:
        """Publish a document (needs a person's approval)."""
        published.append(title)
        return "published"

    return keeper


PUBLISH = AgentTask(
    id="publish",
    message="publish the report",
    grants=("docs:*",),
    expect=(ExpectedCall(tool="docs.publish", arguments={"title": "report"}),),
    verify={"ledger": {"tool": "docs.publish", "count": 1}, "output_contains": "PUBLISHED"},
)


def run_one(task: AgentTask, turns: list[Any], published: list[str]) -> TaskRun:
    keeper = make_keeper(published)

    async def go() -> list[TaskRun]:
        async with keeper:
            return await run_agent_tasks(
                keeper, [task], lambda _: ScriptedModel(turns), count_tokens=len
            )

    return anyio.run(go)[0]


@pytest.mark.parametrize(
    ("approvals", "status", "success", "published"),
    [
        ("approve", "completed", True, ["report"]),
        ("deny", "completed", False, []),
        ("leave", "awaiting_approval", False, []),
    ],
)
def test_a_paused_run_is_approved_denied_or_left_as_the_task_says(
    approvals: str, status: str, success: bool, published: list[str]
) -> None:
    task = AgentTask(**{**_fields(PUBLISH), "approvals": approvals})
    done: list[str] = []
    turns = [scripted_call("docs_publish", title="report"), "Published."]
    result = run_one(task, turns, done)
    assert (result.status, result.success, done) == (status, success, published)
    if approvals == "deny":
        assert result.calls[0].error == "APPROVAL_DENIED"
        assert result.note is not None and "0 SUCCEEDED" in result.note


def test_the_answer_must_hold_the_expected_text() -> None:
    done: list[str] = []
    task = AgentTask(**{**_fields(PUBLISH), "approvals": "approve"})
    result = run_one(task, [scripted_call("docs_publish", title="report"), "Sent."], done)
    assert done == ["report"] and not result.success
    assert result.note == "the answer does not contain 'PUBLISHED'"


def test_each_step_records_the_tools_offered_their_tokens_and_its_time() -> None:
    task = AgentTask(id="find", message="find x", grants=("docs:read",), verify={})
    turns = [scripted_call("docs_find", query="x"), scripted_call("docs_nope"), "ok"]
    result = run_one(task, turns, [])
    assert result.offered == (frozenset({"docs.find"}),) * 3  # (mapped back from docs_find)
    assert result.effects == {"docs.find": "read_only"}
    keeper = make_keeper([])
    exported = get_dialect("openai_chat").export_tools([keeper.catalog.get("docs.find").spec])
    size = len(json.dumps(exported.value[0], separators=(",", ":")))
    assert result.schema_tokens == (size,) * 3
    assert len(result.step_seconds) == 3 and result.seconds >= sum(result.step_seconds)
    assert [(c.tool, c.error) for c in result.calls] == [
        ("docs.find", None),
        ("docs_nope", "UNKNOWN_TOOL"),
    ]
    assert not result.success and result.note == "the task has no verify rule"


def _fields(task: AgentTask) -> dict[str, Any]:
    return {name: getattr(task, name) for name in task.__dataclass_fields__}


def test_a_call_of_a_tool_not_offered_is_named_as_registered() -> None:
    task = AgentTask(id="sneak", message="find x", grants=("docs:read",), verify={})
    result = run_one(task, [scripted_call("docs_publish", title="t"), "no"], [])
    assert [(c.tool, c.error) for c in result.calls] == [("docs.publish", "UNKNOWN_TOOL")]
    assert result.effects["docs.publish"] == "destructive"
