"""Progressive discovery: the `search_tools`, `get_tool_details` and `call_tool` meta-tools.

What it is: three catalog `Tool`s whose specs every dialect can export, so a model that starts
with only these three can find, inspect and call any tool its principal may use. Searching and
detailing go through the selector's hard filter (a forbidden tool is reported as unknown, never
described); `call_tool` reaches only tools the principal could discover, and hands the inner
call to the same executor pipeline as any other call (policy, validation, approvals, ledger),
given here as a `call` function. `call_tool_target` is the one reading of a `call_tool`
call's arguments: the gateway runs what it names as a direct call, and a keeper records it as
the call it stands for (`discovery.Unwrapper`). What it is not: a second authorization path —
it decides nothing itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio.to_thread

from ..catalog.registry import Catalog, Tool
from ..core.errors import ErrorCode, ToolError, suggested
from ..core.signals import PIPELINE_CODES, ToolFailed
from ..core.values import CallContext, Effect, Principal, ToolCall, ToolResult, ToolSpec
from ..schema.validate import compile_validator, violations_text
from .selector import META_TAG, Selector

__all__ = [
    "CALL_TOOL",
    "GET_TOOL_DETAILS",
    "META_TOOL_NAMES",
    "SEARCH_TOOLS",
    "CallFunction",
    "call_target",
    "call_tool_target",
    "invalid_arguments",
    "meta_specs",
    "meta_tools",
    "summary",
]

CallFunction = Callable[[ToolCall], Awaitable[ToolResult]]
"""Runs one call through the executor pipeline (e.g. `keeper.execute`)."""

SEARCH_TOOLS = "search_tools"
"""The meta-tool that searches the tools a principal may use."""
GET_TOOL_DETAILS = "get_tool_details"
"""The meta-tool that gives one tool's full definition."""
CALL_TOOL = "call_tool"
"""The meta-tool that calls a tool by name (the inner call passes every gate)."""
META_TOOL_NAMES = frozenset({SEARCH_TOOLS, GET_TOOL_DETAILS, CALL_TOOL})
"""The names of the three progressive-discovery meta-tools."""

_MAX_K = 20
_SENTENCE = re.compile(r"(?<=[.!?])\s")


def summary(description: str, limit: int = 120) -> str:
    """The first sentence of `description`, cut to `limit` characters."""
    first = _SENTENCE.split(description.strip(), maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


_SPECS = {
    SEARCH_TOOLS: ToolSpec(
        name=SEARCH_TOOLS,
        description=(
            "Find tools for a task. Returns the names and one-line summaries of the best "
            "matching tools you may use, and no_tool_fits=true when none fits well. Then call "
            "get_tool_details for their parameters."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in words."},
                "k": {"type": "integer", "minimum": 1, "maximum": _MAX_K, "default": 5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        effect=Effect.READ_ONLY,
        idempotent=True,
        tags=(META_TAG,),
        source="toolkeeper",
    ),
    GET_TOOL_DETAILS: ToolSpec(
        name=GET_TOOL_DETAILS,
        description=(
            "Get the full definitions (description and JSON Schema of the arguments) of tools "
            "by name, as found with search_tools."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"}, "maxItems": _MAX_K},
            },
            "required": ["names"],
            "additionalProperties": False,
        },
        effect=Effect.READ_ONLY,
        idempotent=True,
        tags=(META_TAG,),
        source="toolkeeper",
    ),
    CALL_TOOL: ToolSpec(
        name=CALL_TOOL,
        description=(
            "Call a tool found with search_tools by name, with arguments that match its "
            "schema from get_tool_details. Returns the tool's result."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        },
        effect=Effect.WRITE,
        permissions=("tools:call",),
        tags=(META_TAG,),
        source="toolkeeper",
    ),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class _MetaConnector:
    run: Callable[[Mapping[str, Any], CallContext], Awaitable[Any]]

    async def invoke(self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        return await self.run(arguments, ctx)


def call_target(selector: Selector, principal: Principal, arguments: Mapping[str, Any]) -> str:
    """The name of the tool a `call_tool` call may run for `principal`.

    Raises:
        ToolFailed: it names a discovery tool, or one `principal` may not use (answered as
            one that does not exist: existence is not disclosed).
    """
    name = str(arguments["name"])
    if name in META_TOOL_NAMES:
        raise ToolFailed("call_tool cannot call a discovery tool", details={"name": name})
    allowed = selector.allowed(principal)
    if name not in allowed:
        raise ToolFailed(
            f"no tool named {name!r}",
            details={"name": name, **suggested(name, sorted(allowed))},
            code=ErrorCode.UNKNOWN_TOOL,
        )
    return name


def invalid_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> ToolError | None:
    """The refusal of arguments that do not fit a meta-tool's schema, worded and detailed as
    the executor words such a refusal (INVALID_ARGUMENTS); None when they fit."""
    violations = compile_validator(spec.input_schema).violations(dict(arguments))
    if not violations:
        return None
    return ToolError.of(
        ErrorCode.INVALID_ARGUMENTS,
        violations_text(violations),
        details={"violations": [v.to_dict() for v in violations]},
    )


def call_tool_target(
    arguments: Mapping[str, Any],
    *,
    principal: Principal,
    selector: Selector | Callable[[], Selector],
    catalog: Catalog,
) -> tuple[Tool, Mapping[str, Any]] | ToolError:
    """The tool a `call_tool` call names for `principal`, and the arguments to call it with.

    Args:
        arguments: The arguments of the `call_tool` call.
        principal: Who the call acts for.
        selector: Whose hard filter says which tools `principal` may reach (or a function
            that returns it, asked only once the arguments fit).
        catalog: Where the named tool is looked up.

    Returns:
        The tool and its arguments, or the refusal: arguments that do not fit `call_tool`'s
        schema (INVALID_ARGUMENTS), a discovery tool named (TOOL_ERROR), or a tool that
        `principal` may not use or the catalog no longer has (UNKNOWN_TOOL, as for one that
        does not exist).
    """
    refused = invalid_arguments(_SPECS[CALL_TOOL], arguments)
    if refused is not None:
        return refused
    try:
        name = call_target(
            selector if isinstance(selector, Selector) else selector(), principal, arguments
        )
    except ToolFailed as exc:
        return ToolError.of(exc.code or ErrorCode.TOOL_ERROR, exc.message, details=exc.details)
    tool = catalog.get(name)
    if tool is None:  # (removed since the selector last saw it)
        return ToolError.of(ErrorCode.UNKNOWN_TOOL, f"no tool named {name!r}")
    return tool, arguments.get("arguments") or {}


def meta_tools(
    selector: Selector | Callable[[], Selector],
    call: CallFunction,
    *,
    call_permission: str | None = "tools:call",
) -> list[Tool]:
    """The three discovery tools, ready to add to a catalog.

    Args:
        selector: Ranks and filters the tools (its hard filter applies to every answer), or
            a function that returns the one to use at each call (a keeper's, which a new
            one replaces once `close_sync` closed it).
        call: Runs the inner call of `call_tool` through the executor pipeline, where the
            inner tool's own permissions are checked again.
        call_permission: The permission `call_tool` itself requires (it may lead to writes);
            None leaves `call_tool` open and relies on the inner call's checks alone.
    """

    def current() -> Selector:
        return selector if isinstance(selector, Selector) else selector()

    async def search_tools(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        selector = current()
        k = max(1, min(int(arguments.get("k", 5)), _MAX_K))
        # The model asked to search: show the best matches even when they are weak, and say
        # when the selector would have abstained.
        # On a worker thread: a ranking takes milliseconds the event loop owes other calls.
        selection = await anyio.to_thread.run_sync(
            functools.partial(
                selector.select,
                str(arguments["query"]),
                principal=ctx.principal,
                k=k,
                abstain=False,
            ),
            abandon_on_cancel=True,  # a call cancelled (its deadline) does not wait for it
        )
        threshold = selector.config.abstain_below
        return {
            "tools": [
                {"name": spec.name, "summary": summary(spec.description)}
                for spec in selection.specs
            ],
            # (nothing found fits nothing, even for a selector that never abstains)
            "no_tool_fits": not selection.candidates
            or (threshold is not None and selection.confidence < threshold),
        }

    async def get_tool_details(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        # Each name once, in the order asked: a repeated name adds nothing but tokens.
        names: Sequence[str] = list(dict.fromkeys(str(n) for n in arguments.get("names", ())))
        names = names[:_MAX_K]
        selector = current()
        allowed = selector.allowed(ctx.principal)
        tools: list[dict[str, Any]] = []
        unknown: list[str] = []
        for name in names:
            spec = selector.get(name)
            if spec is None or name not in allowed:
                unknown.append(name)
                continue
            tools.append(
                {
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": dict(spec.input_schema),
                }
            )
        return {"tools": tools, "unknown": unknown}

    async def call_tool(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        name = call_target(current(), ctx.principal, arguments)
        inner = ToolCall(
            call_id=f"{ctx.call_id}/{name}",
            name=name,
            arguments=dict(arguments.get("arguments") or {}),
            task_id=ctx.task_id,
            principal=ctx.principal,
            metadata={"via": CALL_TOOL},
        )
        result = await call(inner)
        if result.ok:
            return result.data
        error = result.error
        code = str(error.code) if error is not None else str(result.status)
        message = error.message if error is not None else str(result.status)
        # What the inner refusal says beside its message (the violations of its arguments,
        # the approval request to ask for) is what the model needs to correct or follow it.
        details = {**(error.details if error is not None else {})}
        if result.approval_id is not None:
            details["approval_id"] = result.approval_id
        raise ToolFailed(
            message,
            retryable=bool(error and error.retryable),
            details=details | {"code": code, "status": str(result.status)},
            # (what only the pipeline says, an inner call's approval say, stays a tool error)
            code=error.code if error is not None and error.code not in PIPELINE_CODES else None,
        )

    handlers = {
        SEARCH_TOOLS: search_tools,
        GET_TOOL_DETAILS: get_tool_details,
        CALL_TOOL: call_tool,
    }
    tools: list[Tool] = []
    for name, spec in _SPECS.items():
        sensitive: frozenset[str] = frozenset()
        if name == CALL_TOOL:
            spec = replace(spec, permissions=(call_permission,) if call_permission else ())
            # The inner tool's arguments, whose schema says what is secret: its own call
            # records them redacted; `call_tool`'s record cannot tell, so it keeps none.
            sensitive = frozenset({"/arguments"})
        tools.append(
            Tool(spec=spec, connector=_MetaConnector(run=handlers[name]), sensitive=sensitive)
        )
    return tools


def meta_specs() -> list[ToolSpec]:
    """The three discovery tools' specs (for token counts and exports)."""
    return list(_SPECS.values())
