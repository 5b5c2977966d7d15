"""toolkeeper as the executor of an OpenAI Agents SDK agent: `KeeperTools`.

```python
tools = KeeperTools(keeper)
agent = Agent(name="shop", tools=tools.tools)
result = await Runner.run(agent, "...", context=RunScope(principal=alice, task_id="t1"))
if result.interruptions:                      # a call waits for a person
    state = result.to_state()
    ...                                       # approve or deny it in the keeper
    await tools.resolve(state, scope=...)     # hand the keeper's decisions to the SDK
    result = await Runner.run(agent, state)   # the approved call runs, once
```

Each `FunctionTool` is enabled for a run only when the run's principal may see the tool, and
shows the model-visible fields of its `ToolSpec`. Its approval check (`needs_approval`) is
the keeper's pipeline: the call is proposed to `keeper.execute`, which runs it unless it must
wait for a person; then the SDK interrupts the run the SDK way (`result.interruptions`).
`on_invoke_tool` proposes the call again and the keeper answers from its ledger (a call id
runs once). Every refusal goes back to the model as the coded error text. The keeper's rules
are the guardrails here: an SDK `tool_input_guardrail` put on these tools runs after the
keeper has decided.

Needs the `[openai-agents]` extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..policy.grants import may_use
from ._bridge import (
    Exported,
    RunScope,
    decided,
    export,
    held_for_approval,
    model_text,
    require,
    run_call,
)

require("agents", "openai-agents")

from agents import Agent, FunctionTool, RunContextWrapper, RunState, ToolApprovalItem  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

if TYPE_CHECKING:
    from ..core.values import Principal, ToolResult
    from ..keeper import Keeper

__all__ = ["KeeperTools"]

Scope = RunScope | Callable[[RunContextWrapper[Any]], RunScope]

DEFAULT_TASK = "default"
"""The task of calls whose scope names none (the SDK has no conversation id of its own)."""


class KeeperTools:
    """The keeper's tools as OpenAI Agents SDK `FunctionTool`s whose every call runs through
    `keeper.execute`.

    Args:
        keeper: The keeper whose tools, policy and ledger apply.
        scope: Who a run's calls act for and their task: a `RunScope`, or a function of the
            run's context wrapper returning one. By default the run's `context` when it is a
            `RunScope`, else the keeper's default principal, in task `default`.
        principal: Whose tools to build (all of them are built when None: each is enabled
            per run for the principals that may see it). Build after registering the tools.
    """

    def __init__(
        self, keeper: Keeper, *, scope: Scope | None = None, principal: Principal | None = None
    ) -> None:
        self.keeper = keeper
        self._scope = scope
        listed = keeper.catalog.specs() if principal is None else keeper.visible_tools(principal)
        self.tools: list[FunctionTool] = [self._tool(one) for one in export(listed)]
        """The tools, for `Agent(tools=...)`."""
        self._names = {tool.name for tool in self.tools}

    def scope(self, ctx: RunContextWrapper[Any]) -> RunScope:
        """The scope of the run `ctx` belongs to."""
        if self._scope is None:
            return ctx.context if isinstance(ctx.context, RunScope) else RunScope()
        return self._scope if isinstance(self._scope, RunScope) else self._scope(ctx)

    def _tool(self, exported: Exported) -> FunctionTool:
        name = exported.spec.name
        wire = exported.name

        async def propose(ctx: RunContextWrapper[Any], arguments: Any, call_id: str) -> ToolResult:
            return await run_call(
                self.keeper,
                tool=name,
                wire_name=wire,
                call_id=call_id,
                arguments=arguments,
                scope=self.scope(ctx),
                task_id=DEFAULT_TASK,
                framework="openai-agents",
            )

        async def enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            who = self.scope(ctx).principal
            if who is None:  # (the keeper's default principal, or its refusal to name none)
                return any(spec.name == name for spec in self.keeper.visible_tools(None))
            tool = self.keeper.catalog.get(name)
            return tool is not None and may_use(who, tool.spec)

        async def needs_approval(
            ctx: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
        ) -> bool:
            return held_for_approval(await propose(ctx, arguments, call_id))

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            return model_text(await propose(ctx, arguments, ctx.tool_call_id))

        return FunctionTool(
            name=wire,
            description=exported.description,
            params_json_schema=exported.parameters,
            on_invoke_tool=invoke,
            strict_json_schema=exported.strict,
            is_enabled=enabled,
            needs_approval=needs_approval,
        )

    async def resolve(
        self, state: RunState[Any, Agent[Any]], *, scope: RunScope | None = None
    ) -> list[ToolApprovalItem]:
        """Approve, in `state`, each interruption of these tools that the keeper will now
        answer for good: its request was decided by a person (approved or denied) or
        expired, or the keeper never held it (the SDK held a call it could not parse). On
        `Runner.run(agent, state)` the keeper then runs it once or refuses it, coded.

        Args:
            state: The interrupted run (`result.to_state()`).
            scope: The run's scope (needed for its task when it names one and the tools
                were given none).

        Returns:
            The interruptions still waiting for a person.
        """
        await self.keeper.open()
        fixed = self._scope if isinstance(self._scope, RunScope) else None
        task_id = (scope or fixed or RunScope()).task_id or DEFAULT_TASK
        waiting = []
        for item in state.get_interruptions():
            call_id = getattr(item.raw_item, "call_id", None)
            if item.tool_name not in self._names or not isinstance(call_id, str):
                continue
            record = await self.keeper.store.get_call(task_id, call_id)
            if (
                record is None
                or not record.approval_id
                or await decided(self.keeper, record.approval_id)
            ):
                state.approve(item)
            else:
                waiting.append(item)
        return waiting
