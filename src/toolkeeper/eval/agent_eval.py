"""Agent task files, and running them through `toolkeeper.agent.Agent` (`toolkeeper eval agent`).

A task file is JSON, `{"tools": "FILE.py", "tasks": [TASK, ...]}`, or JSON lines, one TASK
each (the tools then come from `--tools`). The tools module defines `register(keeper)`, as a
gateway's `[[tools]]` file does; a relative path is taken from the task file's folder. A TASK:
`{"id", "message", "principal"?, "grants"?, "expect"?: [{"tool", "arguments"?}], "allow"?,
"forbid"?, "verify"?: {"output_contains"?, "ledger"?: {"tool", "status"?, "count"?,
"arguments"?}}, "approvals"?: "approve" | "deny" | "leave"}` (docs/agent.md).

Each task runs as its own run on one keeper (a memory ledger unless told), every call through
`keeper.execute_many`; a wrapper around the model records what each step offered, the tokens
of the definitions it sent and how long it took, and `agent_metrics` turns that into the report.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..agent import Agent, Model, ModelRequest, ModelResponse, RunResult
from ..core.errors import ConfigurationError
from ..core.values import Principal
from ..dialects import get_dialect
from ..keeper import Keeper
from ..testing.scripted import ScriptedCall, ScriptedModel, Turn
from .agent_metrics import AgentTask, ExpectedCall, ObservedCall, TaskRun
from .datasets import DatasetError

__all__ = [
    "load_agent_tasks",
    "load_script",
    "register_tools",
    "run_agent_tasks",
    "verify_rule",
]

_TASK_KEYS = frozenset(
    {"id", "message", "principal", "grants", "expect", "allow", "forbid", "verify", "approvals"}
)
_APPROVALS = ("approve", "deny", "leave")
_STATUSES = frozenset(
    {"SUCCEEDED", "FAILED", "REJECTED", "AWAITING_APPROVAL", "TIMED_OUT", "UNKNOWN_OUTCOME"}
)


def load_agent_tasks(path: str | Path) -> tuple[list[AgentTask], Path | None]:
    """The tasks of a task file, and the tools module it names (resolved), if it names one.

    Raises:
        DatasetError: the file cannot be read, or a task is malformed (the message names the
            file, the task and the key).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    tools: Path | None = None
    try:
        if path.suffix == ".jsonl":
            records = []
            for number, line in enumerate(text.splitlines(), start=1):
                try:
                    records += [json.loads(line)] if line.strip() else []
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{number}: not JSON: {exc}") from exc
        else:
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
                raise DatasetError(f'{path}: not an object with a "tasks" list')
            records = data["tasks"]
            if data.get("tools") is not None:
                if not isinstance(data["tools"], str):
                    raise DatasetError(f'{path}: "tools" is the path of a Python file')
                tools = (path.parent / data["tools"]).resolve()
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not JSON: {exc}") from exc
    tasks = [_task(path, index, record) for index, record in enumerate(records)]
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise DatasetError(f"{path}: two tasks have the id {task.id!r}")
        seen.add(task.id)
    if not tasks:
        raise DatasetError(f"{path}: no tasks")
    return tasks, tools


def _task(path: Path, index: int, record: Any) -> AgentTask:
    where = f"{path}: task {index + 1}"
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: not a JSON object")
    unknown = sorted(set(record) - _TASK_KEYS)
    if unknown:
        raise DatasetError(f"{where}: unknown key {unknown[0]!r}")
    for key in ("id", "message"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise DatasetError(f"{where}: {key!r} must be non-empty text")
    names = {key: _names(where, record, key) for key in ("grants", "allow", "forbid")}
    expect = record.get("expect", [])
    if not isinstance(expect, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("tool"), str)
        and isinstance(e.get("arguments", {}), dict)
        and set(e) <= {"tool", "arguments"}
        for e in expect
    ):
        raise DatasetError(f'{where}: "expect" is a list of {{"tool", "arguments"?}}')
    verify = record.get("verify", {})
    if not isinstance(verify, dict) or not set(verify) <= {"output_contains", "ledger"}:
        raise DatasetError(f'{where}: "verify" holds "output_contains" and/or "ledger"')
    if not isinstance(verify.get("output_contains", ""), str):
        raise DatasetError(f'{where}: "output_contains" is text')
    if "ledger" in verify and not _ledger_rule(verify["ledger"]):
        raise DatasetError(
            f'{where}: "ledger" is {{"tool", "status"?, "arguments"?: {{...}}, "count"?: N}} '
            f"(status one of {', '.join(sorted(_STATUSES))})"
        )
    if record.get("approvals", "leave") not in _APPROVALS:
        raise DatasetError(f'{where}: "approvals" is one of {", ".join(_APPROVALS)}')
    principal = record.get("principal", "eval")
    if not isinstance(principal, str) or not principal:
        raise DatasetError(f'{where}: "principal" must be non-empty text')
    return AgentTask(
        id=record["id"],
        message=record["message"],
        principal=principal,
        grants=names["grants"] if "grants" in record else ("*",),
        expect=tuple(ExpectedCall(tool=e["tool"], arguments=e.get("arguments")) for e in expect),
        allow=names["allow"],
        forbid=names["forbid"],
        verify=verify,
        approvals=record.get("approvals", "leave"),
    )


def _ledger_rule(rule: Any) -> bool:
    count = rule.get("count", 0) if isinstance(rule, dict) else None
    return (
        isinstance(rule, dict)
        and set(rule) <= {"tool", "status", "arguments", "count"}
        and isinstance(rule.get("tool"), str)
        and str(rule.get("status", "SUCCEEDED")).upper() in _STATUSES
        and isinstance(rule.get("arguments", {}), dict)
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 0
    )


def _names(where: str, record: dict[str, Any], key: str) -> tuple[str, ...]:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DatasetError(f"{where}: {key!r} is a list of names")
    return tuple(value)


def load_script(path: str | Path) -> Callable[[AgentTask], ScriptedModel]:
    """The scripted model of each task, from a file of turns: a JSON object mapping task ids
    to turns, or one list of turns for every task. A turn is the final answer (text), a call
    `{"call": NAME, "arguments": {...}}` (arguments may be text: sent as they are), or a list
    of calls proposed together.

    Raises:
        DatasetError: the file cannot be read or holds something else.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read the script: {exc}") from exc
    if isinstance(data, list):
        shared = [_turn(path, "*", turn) for turn in data]
        return lambda task: ScriptedModel(shared)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise DatasetError(f"{path}: a list of turns, or an object of task id -> turns")
    scripts = {k: [_turn(path, k, t) for t in turns] for k, turns in data.items()}

    def model(task: AgentTask) -> ScriptedModel:
        if task.id not in scripts:
            raise DatasetError(f"{path}: no turns for task {task.id!r}")
        return ScriptedModel(scripts[task.id])

    return model


def _turn(path: Path, task: str, turn: Any) -> Turn:
    if isinstance(turn, str):
        return turn
    calls = turn if isinstance(turn, list) else [turn]
    out = []
    for call in calls:
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("call"), str)
            or not isinstance(call.get("arguments", {}), dict | str)
        ):
            raise DatasetError(
                f'{path}: task {task}: a turn is text, {{"call", "arguments"?}} or a list of them'
            )
        out.append(ScriptedCall(name=call["call"], arguments=call.get("arguments", {})))
    return out[0] if not isinstance(turn, list) else out


def register_tools(keeper: Keeper, file: str | Path) -> None:
    """Import a Python file and call its `register(keeper)`.

    Raises:
        ConfigurationError: no such file, or it defines no `register`.
    """
    path = Path(file).resolve()
    if not path.is_file():
        raise ConfigurationError(f"no such tools file: {file}")
    name = f"toolkeeper_eval_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"cannot load tools from {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    register = getattr(module, "register", None)
    if not callable(register):
        raise ConfigurationError(f"{file} defines no register(keeper)")
    register(keeper)


async def verify_rule(task: AgentTask, result: RunResult, keeper: Keeper) -> bool | str:
    """Whether `result` satisfies the task's verify rule: `output_contains` (text the answer
    holds, case ignored) and `ledger` (the run's recorded calls of a tool: with `status`,
    default SUCCEEDED, and `arguments` holding these values; `count` of them exactly, else at
    least one). A rule that is not met says why; no rule at all is never met."""
    rule = task.verify
    if not rule:
        return "the task has no verify rule"
    wanted = rule.get("output_contains")
    if wanted is not None and str(wanted).lower() not in (result.output or "").lower():
        return f"the answer does not contain {wanted!r}"
    ledger = rule.get("ledger")
    if ledger is not None:
        from .agent_metrics import arguments_match

        status = str(ledger.get("status", "SUCCEEDED")).upper()
        records = await keeper.store.list_calls(task_id=result.run_id)
        found = [
            r
            for r in records
            if r.tool == ledger.get("tool")
            and r.status.value == status
            and arguments_match(r.arguments, ledger.get("arguments") or {})
        ]
        count = ledger.get("count")
        if (count is None and not found) or (count is not None and len(found) != count):
            return f"ledger: {len(found)} {status} call(s) of {ledger.get('tool')}"
    return True


class _Recording:
    """A model that passes every request to `inner`, noting what each step offered, the
    tokens of the definitions sent and when it started."""

    def __init__(self, inner: Model, count: Callable[[str], int]) -> None:
        self.inner = inner
        self.dialect = inner.dialect
        self.context_window = inner.context_window
        self.count = count
        self.started: list[float] = []
        self.offered: list[frozenset[str]] = []
        self.tokens: list[int] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.started.append(time.perf_counter())
        self.offered.append(frozenset(_wire(d) for d in request.tools))
        self.tokens.append(
            sum(self.count(json.dumps(d, separators=(",", ":"))) for d in request.tools)
        )
        return await self.inner.request(request)

    def user_message(self, text: str) -> list[dict[str, Any]]:
        return self.inner.user_message(text)

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.inner.result_messages(results)


def _wire(definition: Mapping[str, Any]) -> str:
    function = definition.get("function")
    if isinstance(function, Mapping):
        return str(function.get("name"))
    return str(definition.get("name"))


async def run_agent_tasks(
    keeper: Keeper,
    tasks: Sequence[AgentTask],
    model: Callable[[AgentTask], Model],
    *,
    count_tokens: Callable[[str], int],
    max_steps: int = 20,
    select_k: int | None = None,
    instructions: str | None = None,
) -> list[TaskRun]:
    """Run each task through an `Agent` on `keeper` with the model `model(task)` gives, and
    record what the metrics need. A paused run is approved or denied as its task says (by
    `eval`), then resumed.

    Args:
        count_tokens: The tokens of one exported tool definition's JSON text.
    """
    # (the encoding and the search index are built before the first step is timed)
    count_tokens("")
    if select_k is not None:
        first = tasks[0]
        who = Principal(id=first.principal, grants=frozenset(first.grants))
        keeper.select(first.message, principal=who, k=select_k)
    recorder = _Recording(model(tasks[0]), count_tokens)
    runs = []
    for task in tasks:
        recorder.inner = model(task)
        recorder.started, recorder.offered, recorder.tokens = [], [], []
        agent = Agent(
            keeper,
            recorder,
            max_steps=max_steps,
            select_k=select_k,
            instructions=instructions,
            verify=partial(verify_rule, task, keeper=keeper),
        )
        principal = Principal(id=task.principal, grants=frozenset(task.grants))
        began = time.perf_counter()
        result = await agent.run(task.message, principal=principal)
        while result.status == "awaiting_approval" and task.approvals != "leave":
            for approval_id in result.approvals:
                if task.approvals == "approve":
                    await keeper.approvals.approve(approval_id, by="eval")
                else:
                    await keeper.approvals.deny(approval_id, by="eval", reason="eval task")
            result = await agent.resume(result.run_id)
        ended = time.perf_counter()
        runs.append(_task_run(task, result, recorder, keeper, began, ended))
    return runs


def _task_run(
    task: AgentTask,
    result: RunResult,
    recorder: _Recording,
    keeper: Keeper,
    began: float,
    ended: float,
) -> TaskRun:
    specs = keeper.catalog.specs()
    # (exported names back to registered ones, as the dialect names them in one list)
    back = get_dialect(recorder.dialect).wire_names(specs)
    offered = tuple(frozenset(back.get(n, n) for n in turn) for turn in recorder.offered)
    # (a call of a tool its turn did not offer keeps the name the model wrote)
    named = [
        o.call.name if o.call.name in keeper.catalog else back.get(o.call.name, o.call.name)
        for o in result.calls
    ]
    seen = set().union(*offered) | set(named)
    marks = [*recorder.started, ended]
    return TaskRun(
        task=task,
        status=str(result.status),
        success=result.verdicts.task is True,
        note=result.verdicts.task_note or result.error,
        calls=tuple(
            ObservedCall(
                tool=name,
                arguments=o.call.arguments,
                error=str(o.result.error.code) if o.result.error is not None else None,
            )
            for name, o in zip(named, result.calls, strict=True)
        ),
        offered=offered,
        effects={s.name: str(s.effect) for s in specs if s.name in seen},
        schema_tokens=tuple(recorder.tokens),
        step_seconds=tuple(b - a for a, b in pairwise(marks)),
        seconds=ended - began,
    )
