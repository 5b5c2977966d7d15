"""What a run returns (`RunResult`), and the state a paused run keeps in the ledger (`RunState`).

A run's state is plain JSON: the conversation in the model's own format, the calls of the turn
waiting for a person, the tool names that turn offered, usage. The ledger keeps it
(`LedgerStore.save_run`); the calls' results are not copied into it: they are the ledger's
records, read back by call id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..core.states import CallStatus
from ..core.values import Principal, ToolCall, ToolResult
from .model import Usage

__all__ = ["CallOutcome", "RunResult", "RunState", "RunStatus", "Verdicts"]

STATE_VERSION = 1
"""The shape of a stored run's JSON; a run stored by another shape is refused."""


class RunStatus(StrEnum):
    """Where a run stands."""

    RUNNING = "running"
    """A process is running it (or died while it did: resume it)."""
    COMPLETED = "completed"
    """The model gave its final answer."""
    AWAITING_APPROVAL = "awaiting_approval"
    """A call waits for a person; `agent.resume(run_id)` once they decided."""
    MAX_STEPS = "max_steps"
    """The model was still proposing calls after `max_steps` turns."""
    FAILED = "failed"
    """The model's API failed for good, or a budget ran out."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallOutcome:
    """One call the model proposed, and what came of it."""

    call: ToolCall
    """The call as parsed, acting for the run's principal."""
    result: ToolResult
    """Its result, as the keeper returned it (whole, whatever the model was shown)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdicts:
    """Three separate questions about a run; one may hold while another fails."""

    protocol: bool
    """The model kept to the protocol: every call named a tool it was offered, with arguments
    that parsed and validated, and it ended with an answer."""
    tools: bool
    """Every call that passed the gates and ran succeeded."""
    task: bool | None
    """The independent completion check (`verify`) said the task was done; None: not checked."""
    task_note: str | None = None
    """What `verify` said when it answered with text (a failed check's reason)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """The end (or the pause) of a run."""

    run_id: str
    """The run's id: resume it by this, and its calls are the ledger's task of this id."""
    status: RunStatus
    """Why the run stopped."""
    output: str | None
    """The model's final answer (None unless `completed`)."""
    messages: tuple[Mapping[str, Any], ...]
    """The whole conversation, in the model's own format."""
    calls: tuple[CallOutcome, ...]
    """Every call of the run, in order, with its result."""
    usage: Usage
    """Tokens and requests the run took, over every process that ran it."""
    verdicts: Verdicts
    """Protocol, tool and task success, kept apart."""
    approvals: tuple[str, ...] = ()
    """The approval requests a paused run waits for."""
    error: str | None = None
    """Why a `failed` run failed (a stable code and a message), else None."""


@dataclass(kw_only=True, slots=True)
class RunState:
    """A run's state between turns: what a paused run keeps in the ledger."""

    run_id: str
    """The run's id."""
    principal: Principal
    """Who its calls act for."""
    query: str
    """The user's message: what the tools of a turn are selected for."""
    messages: list[dict[str, Any]]
    """The conversation, in the model's format."""
    calls: list[ToolCall] = field(default_factory=list)
    """Every call proposed so far, in order."""
    pending: list[ToolCall] = field(default_factory=list)
    """The calls of the turn that paused (all of them: those done replay from the ledger)."""
    turn_tools: list[str] = field(default_factory=list)
    """The names of the tools the paused turn offered (results are formatted against them)."""
    wanted: list[str] = field(default_factory=list)
    """Capabilities the model asked for that its turn lacked: the next selection's hints."""
    refusals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The refusals of calls that never ran (a refusal may leave no ledger record), by call
    id: what a resumed run reports for them, without proposing them again."""
    refs: bool = False
    """Whether a result was cut to a head (the model is offered `read_result` from then on)."""
    steps: int = 0
    """Model turns taken."""
    usage: Usage = field(default_factory=Usage)
    """Tokens and requests so far."""
    output: str | None = None
    """The final answer, once there is one."""
    error: str | None = None
    """Why the run failed, when it did."""
    version: int = 0
    """The stored version this state was read at (0: never stored)."""

    def dumps(self) -> str:
        """The JSON text the ledger keeps."""
        p = self.principal
        return json.dumps(
            {
                "v": STATE_VERSION,
                "principal": {
                    "id": p.id,
                    "tenant": p.tenant,
                    "environment": p.environment,
                    "grants": sorted(p.grants),
                    "attributes": dict(p.attributes),
                },
                "query": self.query,
                "messages": self.messages,
                "calls": [_call(c) for c in self.calls],
                "pending": [c.call_id for c in self.pending],
                "turn_tools": self.turn_tools,
                "wanted": self.wanted,
                "refusals": self.refusals,
                "refs": self.refs,
                "steps": self.steps,
                "usage": self.usage.to_dict(),
                "output": self.output,
                "error": self.error,
            },
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )

    @classmethod
    def loads(cls, run_id: str, text: str, version: int) -> RunState:
        """The state stored as `text` at `version`.

        Raises:
            ValueError: the text is not a run state this toolkeeper wrote.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
            raise ValueError(f"run {run_id}: the stored state is not one this toolkeeper reads")
        who = data["principal"]
        principal = Principal(
            id=who["id"],
            tenant=who["tenant"],
            environment=who["environment"],
            grants=frozenset(who["grants"]),
            attributes=who["attributes"],
        )
        calls = [
            ToolCall(
                call_id=c["call_id"],
                name=c["name"],
                arguments=c["arguments"],
                task_id=run_id,
                principal=principal,
            )
            for c in data["calls"]
        ]
        by_id = {c.call_id: c for c in calls}
        return cls(
            run_id=run_id,
            principal=principal,
            query=data["query"],
            messages=data["messages"],
            calls=calls,
            pending=[by_id[i] for i in data["pending"]],
            turn_tools=data["turn_tools"],
            wanted=data["wanted"],
            refusals=data["refusals"],
            refs=data["refs"],
            steps=data["steps"],
            usage=Usage(**data["usage"]),
            output=data["output"],
            error=data["error"],
            version=version,
        )


def _call(call: ToolCall) -> dict[str, Any]:
    arguments = call.arguments
    return {
        "call_id": call.call_id,
        "name": call.name,
        "arguments": arguments if isinstance(arguments, str) else dict(arguments),
    }


def approvals_of(results: Sequence[ToolResult]) -> tuple[str, ...]:
    """The approval requests among `results` still waiting for a person."""
    return tuple(
        r.approval_id
        for r in results
        if r.status is CallStatus.AWAITING_APPROVAL and r.approval_id is not None
    )
