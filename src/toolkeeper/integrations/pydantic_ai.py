"""toolkeeper as the executor of a pydantic-ai agent: `KeeperToolset`.

```python
toolset = KeeperToolset(keeper)
agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
result = await agent.run("...", deps=RunScope(principal=alice, task_id="t1"))
```

The model sees the tools the run's principal may see (model-visible fields of each
`ToolSpec`), and every call it makes runs through `keeper.execute`. A refusal reaches the model
as pydantic-ai's `ToolFailed`, whose text is the coded error (`{"error": {"code": ...}}`). A call
the keeper holds for a person's approval is deferred the pydantic-ai way (`ApprovalRequired`):
the run ends with `DeferredToolRequests`; once the request is decided in the keeper
(`keeper.approvals.approve(...)`, or `toolkeeper approvals`), `decisions(requests)` builds
the `DeferredToolResults` to continue with, and the call runs (once) or is refused then.

Needs the `[pydantic-ai]` extra.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ._bridge import (
    RunScope,
    decided,
    held_for_approval,
    model_text,
    require,
    run_call,
    tools_for,
)

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed  # noqa: E402
from pydantic_ai.tools import (  # noqa: E402
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDefinition,
    ToolDenied,
)
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool  # noqa: E402
from pydantic_core import from_json  # noqa: E402

if TYPE_CHECKING:
    from ..keeper import Keeper

__all__ = ["RAW_ARGUMENTS", "TOOL_NAME", "KeeperToolset"]

RAW_ARGUMENTS = "\x00toolkeeper_raw"
"""The key under which arguments that are no JSON object reach `call_tool`, as the model
wrote them (the keeper refuses them as INVALID_ARGUMENTS, and records that)."""

TOOL_NAME = "toolkeeper_tool"
"""The key of a tool definition's metadata (never sent to the model) that holds the keeper's
name of the tool."""

Scope = RunScope | Callable[[RunContext[Any]], RunScope]


class _AsWritten:
    """An arguments validator that lets every call through to the keeper, which validates:
    a JSON object as parsed, anything else as the text the model wrote."""

    def validate_json(
        self,
        input: str | bytes | bytearray,
        *,
        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
        **kwargs: Any,
    ) -> Any:
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
        try:
            value = from_json(text, allow_partial=allow_partial)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        return {} if allow_partial not in (False, "off") else {RAW_ARGUMENTS: text}

    def validate_python(
        self,
        input: Any,
        *,
        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
        **kwargs: Any,
    ) -> Any:
        if isinstance(input, dict):
            return input
        return {RAW_ARGUMENTS: json.dumps(input, default=str)}


_AS_WRITTEN = _AsWritten()


class KeeperToolset(AbstractToolset[Any]):
    """The keeper's tools, as a pydantic-ai toolset whose every call runs through
    `keeper.execute`.

    Args:
        keeper: The keeper whose tools, policy and ledger apply.
        scope: Who a run's calls act for and their task: a `RunScope`, or a function of the
            run's `RunContext` returning one. By default the run's `deps` when it is a
            `RunScope`, else the keeper's default principal; the task is the scope's, else
            the run's `conversation_id` (the same across the runs that continue one
            conversation, so an approved call is the same call).
        id: The toolset's id among an agent's toolsets.
    """

    def __init__(self, keeper: Keeper, *, scope: Scope | None = None, id: str | None = None):
        self.keeper = keeper
        self._scope = scope
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    def scope(self, ctx: RunContext[Any]) -> RunScope:
        """The scope of the run `ctx` belongs to."""
        if self._scope is None:
            return ctx.deps if isinstance(ctx.deps, RunScope) else RunScope()
        return self._scope if isinstance(self._scope, RunScope) else self._scope(ctx)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools the run's principal may see, with their model-visible fields only.

        A tool that declares the resources it writes (`writes=`) runs alone among a step's
        calls (pydantic-ai's `sequential`): `keeper.execute` takes no resource locks (only
        `execute_many` does), and two writes to one resource must not overlap.
        """
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=tool.parameters,
                    metadata={TOOL_NAME: tool.spec.name},
                    sequential=self._writes(tool.spec.name),
                ),
                max_retries=1,
                args_validator=_AS_WRITTEN,
            )
            for tool in tools_for(self.keeper, self.scope(ctx).principal)
        }

    def _writes(self, name: str) -> bool:
        tool = self.keeper.catalog.get(name)
        return tool is not None and tool.writes is not None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the call through `keeper.execute`.

        Raises:
            ApprovalRequired: the keeper holds the call for a person's decision (metadata:
                `approval_id`, `error`).
            ToolFailed: the keeper refused the call or the tool failed; the text is the coded
                error the model reads.
        """
        scope = self.scope(ctx)
        result = await run_call(
            self.keeper,
            tool=(tool.tool_def.metadata or {}).get(TOOL_NAME, name),
            wire_name=name,
            call_id=ctx.tool_call_id or "",
            arguments=tool_args.get(RAW_ARGUMENTS, tool_args),
            scope=scope,
            task_id=ctx.conversation_id or ctx.run_id or "default",
            framework="pydantic-ai",
        )
        if result.ok:
            return model_text(result)
        if held_for_approval(result) and result.error is not None:
            raise ApprovalRequired(
                metadata={"approval_id": result.approval_id, "error": result.error.to_dict()}
            )
        raise ToolFailed(model_text(result))

    async def decisions(self, requests: DeferredToolRequests) -> DeferredToolResults:
        """The results to continue a run with: each approval request a person has decided in
        the keeper (approved, denied or expired) is let through, so that `keeper.execute`
        answers it: the approved call runs once, a denied one reaches the model as the coded
        refusal. Requests still pending are left out (the run defers them again)."""
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call in requests.approvals:
            approval_id = requests.metadata.get(call.tool_call_id, {}).get("approval_id")
            if isinstance(approval_id, str) and await decided(self.keeper, approval_id):
                approvals[call.tool_call_id] = ToolApproved()
        return DeferredToolResults(approvals=approvals)
