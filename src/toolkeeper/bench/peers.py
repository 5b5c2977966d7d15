"""The other frameworks' tool-call paths, driven the way their own agent loops drive them.

Each peer turns the same async Python function into a tool once, then pays per call exactly
what its framework pays between "the model sent a call id and a JSON string" and "the
function's result is in hand":

- pydantic-ai: `FunctionToolset`. Per call, what `ToolManager` does: a `RunContext` for the call
  (`dataclasses.replace`, as `_build_tool_context`), JSON validation by the tool's
  `args_validator.validate_json` (as `_validate_tool_args`), then `FunctionToolset.call_tool`.
- openai-agents: `function_tool(func)`, then `FunctionTool.on_invoke_tool(ToolContext, json)`,
  which parses and validates the JSON itself. It enforces no deadline there (a tool's
  `timeout` applies in its runner, which wraps the call in a task and `asyncio.wait_for`).
- openai-agents with a deadline: the same call inside `anyio.fail_after(ToolSpec.timeout)`,
  the per-call deadline every toolkeeper attempt has. For reference, not a target: it tells
  what the deadline alone costs next to the peer's call.
- langchain-core: `StructuredTool.from_function(coroutine=func)`, then `ainvoke` of a
  `tool_call` dict whose `args` were parsed from the JSON (as a chat model's tool-call parser
  does), returning a `ToolMessage`.

The frameworks are optional (`pip install "toolkeeper[bench]"`) and never imported by
`import toolkeeper`; they are imported through `importlib`, so type checking does not depend on
whether they are installed. A missing one raises `PeerUnavailable`.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import anyio

from ..core.values import ToolSpec

__all__ = [
    "INSTALL_HINT",
    "PEERS",
    "Case",
    "Peer",
    "PeerUnavailable",
    "version_of",
]

INSTALL_HINT = 'pip install "toolkeeper[bench]"'

Invoke = Callable[[str, str], Awaitable[Any]]
"""One tool call: `(call_id, JSON arguments) -> result`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One way of calling the benchmark function, ready to be timed."""

    key: str
    """Stable identifier in the JSON report (`toolkeeper.memory`, `openai_agents`, ...)."""
    label: str
    """What a person reads in the table."""
    version: str | None
    """The version of the package under test."""
    invoke: Invoke
    """Performs one call from a call id and JSON arguments."""
    check: Callable[[Any, int], bool]
    """Whether a result is the expected sum (run outside the timed region)."""


class PeerUnavailable(Exception):
    """A peer framework cannot be measured here (not installed, or its API changed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def version_of(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _load(module: str, distribution: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(f"{distribution} is not installed ({INSTALL_HINT})") from exc


async def _pydantic_ai(func: Callable[..., Awaitable[int]]) -> Case:
    run_context = _load("pydantic_ai", "pydantic-ai-slim").RunContext
    toolset = _load("pydantic_ai.toolsets", "pydantic-ai-slim").FunctionToolset([func])
    model = _load("pydantic_ai.models.test", "pydantic-ai-slim").TestModel()
    usage = _load("pydantic_ai.usage", "pydantic-ai-slim").RunUsage()
    ctx = run_context(deps=None, model=model, usage=usage)
    name = func.__name__
    tool = (await toolset.get_tools(ctx))[name]
    validator = tool.args_validator

    async def invoke(call_id: str, arguments: str) -> Any:
        call_ctx = dataclasses.replace(
            ctx,
            tool_name=name,
            tool_call_id=call_id,
            retry=0,
            max_retries=tool.max_retries,
        )
        args = validator.validate_json(
            arguments, allow_partial="off", context=call_ctx.validation_context
        )
        return await toolset.call_tool(name, args, call_ctx, tool)

    return Case(
        key="pydantic_ai",
        label="pydantic-ai FunctionToolset (validate + call_tool)",
        version=version_of("pydantic-ai-slim"),
        invoke=invoke,
        check=lambda result, expected: bool(result == expected),
    )


async def _openai_agents(func: Callable[..., Awaitable[int]]) -> Case:
    agents = _load("agents", "openai-agents")
    tool_context = _load("agents.tool_context", "openai-agents").ToolContext
    agents.set_tracing_disabled(True)  # no trace ever leaves this machine
    tool = agents.function_tool(func)
    name = tool.name

    async def invoke(call_id: str, arguments: str) -> Any:
        ctx = tool_context(
            context=None, tool_name=name, tool_call_id=call_id, tool_arguments=arguments
        )
        return await tool.on_invoke_tool(ctx, arguments)

    return Case(
        key="openai_agents",
        label="openai-agents FunctionTool.on_invoke_tool",
        version=version_of("openai-agents"),
        invoke=invoke,
        check=lambda result, expected: bool(result == expected),
    )


async def _openai_agents_deadline(func: Callable[..., Awaitable[int]]) -> Case:
    bare = await _openai_agents(func)
    invoke_bare = bare.invoke
    timeout = ToolSpec(name=func.__name__).timeout  # (the default a toolkeeper tool gets)

    async def invoke(call_id: str, arguments: str) -> Any:
        with anyio.fail_after(timeout):
            return await invoke_bare(call_id, arguments)

    return dataclasses.replace(
        bare,
        key="openai_agents_deadline",
        label="openai-agents+deadline: on_invoke_tool in anyio.fail_after",
        invoke=invoke,
    )


async def _langchain_core(func: Callable[..., Awaitable[int]]) -> Case:
    structured_tool = _load("langchain_core.tools", "langchain-core").StructuredTool
    name = func.__name__
    tool = structured_tool.from_function(
        coroutine=func, name=name, description=f"the benchmark function {name}"
    )

    async def invoke(call_id: str, arguments: str) -> Any:
        call = {"type": "tool_call", "id": call_id, "name": name, "args": json.loads(arguments)}
        return await tool.ainvoke(call)

    return Case(
        key="langchain_core",
        label="langchain-core StructuredTool.ainvoke",
        version=version_of("langchain-core"),
        invoke=invoke,
        check=lambda result, expected: str(getattr(result, "content", result)) == str(expected),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Peer:
    """A framework the executor is compared with."""

    key: str
    """Identifier in the JSON report."""
    name: str
    """Short display name (`openai-agents`)."""
    distribution: str
    """The PyPI distribution that provides it."""
    build: Callable[[Callable[..., Awaitable[int]]], Awaitable[Case]]
    """Turns the benchmark function into a timed `Case`; raises `PeerUnavailable`."""


PEERS: tuple[Peer, ...] = (
    Peer(
        key="pydantic_ai",
        name="pydantic-ai",
        distribution="pydantic-ai-slim",
        build=_pydantic_ai,
    ),
    Peer(
        key="openai_agents",
        name="openai-agents",
        distribution="openai-agents",
        build=_openai_agents,
    ),
    Peer(
        key="openai_agents_deadline",
        name="openai-agents + deadline",
        distribution="openai-agents",
        build=_openai_agents_deadline,
    ),
    Peer(
        key="langchain_core",
        name="langchain-core",
        distribution="langchain-core",
        build=_langchain_core,
    ),
)
