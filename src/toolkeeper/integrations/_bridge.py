"""What every framework integration shares: the tools a principal may see, exported as the
model sees them, and the one way their calls run (`Keeper.execute`).

What it is not: a second route. A framework's tool call becomes a `ToolCall` here and goes
through `keeper.execute`, every gate included; a refusal comes back as the result's coded
error, which each integration hands to the model the way its framework expects.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..core import extras
from ..core.errors import ErrorCode
from ..core.values import Principal, ToolCall, ToolResult, ToolSpec
from ..dialects.openai_chat import OpenAIChat
from ..dialects.results import RESULT_CHARS, result_text, shown_result
from ..ledger.base import ApprovalStatus

if TYPE_CHECKING:
    from ..keeper import Keeper

__all__ = [
    "Exported",
    "RunScope",
    "decided",
    "export",
    "held_for_approval",
    "model_text",
    "require",
    "run_call",
    "tools_for",
]

_DIALECT = OpenAIChat()
"""Names and schemas as OpenAI takes them: the strictest of the vendors the frameworks
speak to (a tool named `orders.get` goes out as `orders_get`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunScope:
    """Who a framework run's tool calls act for, and the task they belong to."""

    principal: Principal | None = None
    """Who the calls act for; None: the keeper's default principal (with none, every call
    is refused)."""
    task_id: str | None = None
    """The task the calls belong to (the ledger dedupes call ids within a task); None: the
    framework's own conversation or thread id, where it has one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Exported:
    """One tool as a framework shows it to the model: model-visible fields only."""

    name: str
    """The name the model calls it by (the keeper's name, rewritten where OpenAI would
    refuse it)."""
    description: str
    """When to use it, when not, its side effects."""
    parameters: dict[str, Any]
    """The JSON Schema of its arguments, as OpenAI takes it."""
    strict: bool
    """Whether `parameters` qualifies for OpenAI's strict mode."""
    spec: ToolSpec
    """The keeper's spec (trusted fields included): for the integration, never the model."""


def require(module: str, extra: str) -> Any:
    """Import a framework, or say which extra installs it.

    Raises:
        ImportError: the framework is not installed; the message names
            `pip install "toolkeeper[EXTRA]"`.
    """
    return extras.require(module, extra, f"toolkeeper.integrations ({module})")


def tools_for(keeper: Keeper, principal: Principal | None) -> list[Exported]:
    """The tools `principal` (else the keeper's default one) may see, as the model sees them.

    Raises:
        ConfigurationError: no principal is given and the keeper has no default one.
    """
    return export(keeper.visible_tools(principal))


def export(specs: Sequence[ToolSpec]) -> list[Exported]:
    """`specs` as the model sees them, named as in one list of them all. Each call gets
    its own copy of the schemas (a framework may change what it is given)."""
    return [replace(one, parameters=copy.deepcopy(one.parameters)) for one in _EXPORTS.get(specs)]


class _Exports:
    """The latest exports, by the identity of the specs they were made from: a framework
    lists the tools at every step (pydantic-ai), and exporting fifty took 23 ms. A changed
    tool is a new spec object, so a new key; an entry holds its specs, so no id of a key is
    reused while the entry lives."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._made: OrderedDict[tuple[int, ...], list[Exported]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, specs: Sequence[ToolSpec]) -> list[Exported]:
        key = tuple(map(id, specs))
        with self._lock:
            made = self._made.get(key)
            if made is not None:
                self._made.move_to_end(key)
                return made
        made = _export(specs)
        with self._lock:
            self._made[key] = made
            if len(self._made) > self._size:
                self._made.popitem(last=False)
        return made


def _export(specs: Sequence[ToolSpec]) -> list[Exported]:
    out = []
    for spec, one in zip(specs, _DIALECT.export_each(specs), strict=True):
        function = one.value["function"]
        out.append(
            Exported(
                name=str(function["name"]),
                description=str(function.get("description", "")),
                parameters=dict(function["parameters"]),
                strict=bool(function.get("strict")),
                spec=spec,
            )
        )
    return out


_EXPORTS = _Exports()


async def run_call(
    keeper: Keeper,
    *,
    tool: str,
    wire_name: str,
    call_id: str,
    arguments: Mapping[str, Any] | str,
    scope: RunScope,
    task_id: str,
    framework: str,
) -> ToolResult:
    """Run one call a framework's model proposed, through `keeper.execute` (never raises for
    the model's input: a refusal is the result's coded error).

    Args:
        keeper: Runs, checks and records the call.
        tool: The keeper's name of the tool.
        wire_name: The name the model called it by.
        call_id: The model's id of the call.
        arguments: As parsed, or the text the model wrote.
        scope: Who it acts for; its task, when it names one.
        task_id: The task otherwise (the framework's conversation or thread).
        framework: Which framework proposed it (recorded with the call).
    """
    call = ToolCall(
        call_id=call_id,
        name=tool,
        arguments=arguments,
        task_id=scope.task_id or task_id,
        principal=scope.principal,
        metadata={"framework": framework, "wire_name": wire_name},
    )
    return await keeper.execute(call)


def model_text(result: ToolResult) -> str:
    """What the model reads for `result`: its data, or `{"error": {code, message, ...}}`, cut
    to `RESULT_CHARS` with a note when longer (the ledger keeps it whole)."""
    return result_text(shown_result(result, RESULT_CHARS))


def held_for_approval(result: ToolResult) -> bool:
    """Whether the call waits for a person's decision (nothing ran)."""
    return result.error is not None and result.error.code is ErrorCode.APPROVAL_REQUIRED


async def decided(keeper: Keeper, approval_id: str) -> bool:
    """Whether a person has decided the approval request (approved or denied it), or it
    expired: either way `keeper.execute` now answers its call for good."""
    found = await keeper.approvals.get(approval_id)
    if found is None:
        return False
    if found.status is not ApprovalStatus.PENDING:
        return True
    return all(waiting.id != approval_id for waiting in await keeper.approvals.pending())
