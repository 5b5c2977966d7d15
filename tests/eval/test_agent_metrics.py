"""The agent metrics on hand-made runs, where each figure is known by counting."""

from __future__ import annotations

import pytest

from toolkeeper.eval.agent_metrics import (
    AGENT_METRICS,
    AgentTask,
    ExpectedCall,
    ObservedCall,
    TaskRun,
    agent_report,
    argument_accuracy,
    argument_validity,
    arguments_match,
    exposed_tools,
    forbidden_call_rate,
    irrelevant_call_rate,
    latency_ms,
    schema_tokens,
    task_success_rate,
    tool_selection_accuracy,
    unsafe_exposure_rate,
)

EFFECTS = {"find": "read_only", "save": "write", "wipe": "destructive", "read_result": "read_only"}

SAVE = AgentTask(
    id="save",
    message="save x",
    expect=(ExpectedCall(tool="save", arguments={"name": "x"}), ExpectedCall(tool="find")),
    forbid=("wipe",),
)
LOOK = AgentTask(id="look", message="look", expect=(ExpectedCall(tool="find"),), allow=("save",))


def run(
    task: AgentTask,
    *calls: ObservedCall,
    offered: set[str],
    success: bool = True,
    tokens: tuple[int, ...] = (100,),
    steps: tuple[float, ...] = (0.1,),
    seconds: float = 0.1,
) -> TaskRun:
    seen = offered | {c.tool for c in calls}
    return TaskRun(
        task=task,
        status="completed",
        success=success,
        calls=calls,
        offered=(frozenset(offered),),
        effects={n: e for n, e in EFFECTS.items() if n in seen},
        schema_tokens=tokens,
        step_seconds=steps,
        seconds=seconds,
    )


# save: a call with bad arguments, then the right one, then a call of the forbidden tool; find
# never called. look: find, read_result (neutral), save (allowed), and an unknown tool.
RUNS = [
    run(
        SAVE,
        ObservedCall(tool="save", arguments={"nom": "x"}, error="INVALID_ARGUMENTS"),
        ObservedCall(tool="save", arguments={"name": "x", "extra": 1}),
        ObservedCall(tool="wipe", arguments={}, error="APPROVAL_REQUIRED"),
        offered={"find", "save", "wipe"},
        success=False,
        tokens=(100, 120, 140),
        steps=(0.1, 0.2, 0.3),
        seconds=0.6,
    ),
    run(
        LOOK,
        ObservedCall(tool="find", arguments={"q": "a"}),
        ObservedCall(tool="read_result", arguments={"ref": "r"}),
        ObservedCall(tool="save", arguments={"name": "y"}),
        ObservedCall(tool="nope", arguments={}, error="UNKNOWN_TOOL"),
        offered={"find", "save"},
        tokens=(40,),
        steps=(0.05,),
        seconds=0.05,
    ),
]


def test_tool_selection_counts_each_expected_tool_called() -> None:
    rate = tool_selection_accuracy(RUNS)  # save: save yes, find no; look: find yes
    assert (rate.numerator, rate.denominator) == (2, 3)


def test_argument_validity_leaves_out_calls_of_unknown_tools() -> None:
    rate = argument_validity(RUNS)  # 6 calls checked (nope is not), 1 invalid
    assert (rate.numerator, rate.denominator) == (5, 6)


def test_argument_accuracy_wants_the_expected_values_in_a_valid_call() -> None:
    rate = argument_accuracy(RUNS)  # only save's expected call names arguments
    assert (rate.numerator, rate.denominator) == (1, 1)
    wrong = run(SAVE, ObservedCall(tool="save", arguments={"name": "z"}), offered={"save"})
    assert argument_accuracy([wrong]).numerator == 0


def test_arguments_match_is_a_subset_of_equal_values() -> None:
    assert arguments_match({"a": 1, "b": 2}, {"a": 1})
    assert not arguments_match({"a": 1}, {"a": 1, "b": 2})
    assert not arguments_match({"a": "1"}, {"a": 1})
    assert not arguments_match('{"a": 1}', {"a": 1})


def test_irrelevant_calls_are_those_neither_expected_nor_allowed() -> None:
    rate = irrelevant_call_rate(RUNS)
    # save: wipe is irrelevant (3 calls); look: nope is (read_result is neutral: 3 calls)
    assert (rate.numerator, rate.denominator) == (2, 6)


def test_task_success_counts_the_verify_verdicts() -> None:
    rate = task_success_rate(RUNS)
    assert (rate.numerator, rate.denominator, rate.value) == (1, 2, 0.5)


def test_unsafe_exposure_is_a_risky_tool_the_task_did_not_need() -> None:
    assert exposed_tools(RUNS[0]) == ["wipe"]  # destructive and forbidden; save was expected
    assert exposed_tools(RUNS[1]) == []  # save is write, but allowed
    rate = unsafe_exposure_rate(RUNS)
    assert (rate.numerator, rate.denominator) == (1, 2)


def test_a_forbidden_read_only_tool_offered_is_an_exposure() -> None:
    task = AgentTask(id="t", message="m", forbid=("find",))
    assert exposed_tools(run(task, offered={"find"})) == ["find"]


def test_forbidden_calls_are_counted_over_tasks_that_forbid() -> None:
    rate = forbidden_call_rate(RUNS)
    assert (rate.numerator, rate.denominator) == (1, 1)


def test_schema_tokens_per_step_and_per_task() -> None:
    tokens = schema_tokens(RUNS)
    assert tokens["per_step_mean"] == pytest.approx(100.0)  # (100+120+140+40) / 4
    assert tokens["per_step_max"] == 140
    assert tokens["per_task_mean"] == pytest.approx(200.0)  # (360 + 40) / 2


def test_latency_percentiles_per_task_and_per_step() -> None:
    latency = latency_ms(RUNS)
    assert latency["task_p50"] == pytest.approx(325.0)
    assert latency["step_p50"] == pytest.approx(150.0)
    assert latency["step_p99"] == pytest.approx(297.0)


def test_no_runs_give_no_rate_rather_than_zero() -> None:
    report = agent_report([])
    assert all(m["rate"] is None for m in report["metrics"].values())


def test_the_report_has_every_rate_and_a_row_per_task() -> None:
    report = agent_report(RUNS)
    assert list(report["metrics"]) == list(AGENT_METRICS)
    assert report["metrics"]["task_success_rate"]["rate"] == 0.5
    assert [r["exposed"] for r in report["runs"]] == [["wipe"], []]
    assert report["calls"] == 7 and report["steps"] == 4
