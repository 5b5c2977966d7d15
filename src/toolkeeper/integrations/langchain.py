"""toolkeeper as the executor of LangChain and LangGraph tools: `keeper_tools`.

```python
tools = keeper_tools(keeper, alice)         # the tools alice may see, as BaseTools
model = chat_model.bind_tools(tools)
graph = ...ToolNode(tools)...               # or tool.ainvoke(tool_call) in your own loop
config = {"configurable": {"thread_id": "t1", "toolkeeper_scope": RunScope(principal=alice)}}
```

Each `BaseTool` shows the model-visible fields of its `ToolSpec` (its `args_schema` is the
spec's JSON Schema) and runs every call through `keeper.execute`. A refusal is a
`ToolMessage` with `status="error"` whose content is the coded error; on success the message's
artifact is the `ToolResult` as plain data (`msgspec.to_builtins`), which every LangGraph
checkpointer can store. A call the keeper holds for a person's approval pauses a
LangGraph graph the LangGraph way (`interrupt`, with the approval id in its value); once the
request is decided in the keeper, `graph.invoke(Command(resume=...), config)` runs the tool
again, and the keeper runs the call once or refuses it (a graph resumed before that pauses
again). Outside a graph run (a checkpointer is needed to pause), the call is answered as
waiting: APPROVAL_REQUIRED with the approval id.

The principal and task of a run come from its config's `configurable`: `toolkeeper_scope`
(a `RunScope`) when given, else the principal the tools were built for; the task is the
scope's, else the `thread_id`, else `default`.

Needs the `[langchain]` extra (and `langgraph` for graphs).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

from ._bridge import (
    Exported,
    RunScope,
    held_for_approval,
    model_text,
    require,
    run_call,
    tools_for,
)

require("langchain_core", "langchain")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import BaseTool, ToolException  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

# (at run time: LangChain reads `_arun`'s type hints to find its `config` parameter)
from ..core.values import Principal, ToolResult  # noqa: E402
from ..keeper import Keeper  # noqa: E402

__all__ = ["SCOPE_KEY", "KeeperTool", "keeper_tools"]

SCOPE_KEY = "toolkeeper_scope"
"""The key of a run config's `configurable` that holds the run's `RunScope`."""

DEFAULT_TASK = "default"
"""The task of calls whose run names none (no scope task, no thread id)."""


def keeper_tools(keeper: Keeper, principal: Principal | None = None) -> list[KeeperTool]:
    """The tools `principal` (else the keeper's default one) may see, as LangChain tools.

    Raises:
        ConfigurationError: no principal is given and the keeper has no default one.
    """
    return [KeeperTool.of(keeper, one, principal) for one in tools_for(keeper, principal)]


class KeeperTool(BaseTool):
    """One of the keeper's tools as a LangChain tool whose every call runs through
    `keeper.execute`. Build them with `keeper_tools`."""

    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool | str | Any = True
    _keeper: Keeper = PrivateAttr()
    _tool: str = PrivateAttr()
    _principal: Principal | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, keeper: Keeper, exported: Exported, principal: Principal | None) -> KeeperTool:
        """The LangChain tool of one exported tool, for `principal` by default."""
        tool = cls(
            name=exported.name,
            description=exported.description,
            args_schema=exported.parameters,
        )
        tool._keeper = keeper
        tool._tool = exported.spec.name
        tool._principal = principal
        return tool

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # The keeper validates: the arguments go to it as the model wrote them.
        return (), {"arguments": tool_input, "call_id": tool_call_id}

    async def _arun(
        self, *, arguments: Any, call_id: str | None, config: RunnableConfig
    ) -> tuple[str, dict[str, Any]]:
        configurable = config.get("configurable") or {}
        given = configurable.get(SCOPE_KEY)
        scope = given if isinstance(given, RunScope) else RunScope(principal=self._principal)
        thread = configurable.get("thread_id")
        call_id = call_id or f"lc_{uuid.uuid4().hex}"

        async def propose() -> ToolResult:
            return await run_call(
                self._keeper,
                tool=self._tool,
                wire_name=self.name,
                call_id=call_id,
                arguments=arguments,
                scope=scope,
                task_id=str(thread) if thread is not None else DEFAULT_TASK,
                framework="langchain",
            )

        result = await propose()
        # Resumed while the request is still undecided (resume values are not decisions:
        # the keeper's are), the graph pauses again for it.
        while held_for_approval(result) and _paused(result):
            result = await propose()
        if not result.ok:
            raise ToolException(model_text(result))
        return model_text(result), msgspec.to_builtins(result)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "toolkeeper's LangChain tools run asynchronously: use ainvoke (or astream)"
        )


def _paused(result: ToolResult) -> bool:
    """Pause the LangGraph run for the call's approval (LangGraph's `interrupt` raises, and
    the graph stops here); True once the run is resumed. False when there is no graph run to
    pause (a checkpointer is needed): the call is then answered as waiting."""
    try:
        from langgraph.types import interrupt
    except ImportError:
        return False
    assert result.error is not None
    try:
        interrupt(
            {
                "approval_id": result.approval_id,
                "tool": result.tool,
                "call_id": result.call_id,
                "error": result.error.to_dict(),
            }
        )
    except (RuntimeError, KeyError):
        return False  # (not inside a graph run that can pause)
    return True
