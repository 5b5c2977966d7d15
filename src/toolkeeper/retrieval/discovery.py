"""A keeper's progressive discovery: the meta-tools in its catalog, and its `call_tool`
proposals read as the calls they stand for.

What it is: `add_discovery`, which adds `search_tools`, `get_tool_details` and `call_tool` to
a catalog, and the `Unwrapper` a keeper runs each proposal through (`call_tool_target` reads
the arguments, as the gateway's does). What it is not: another pipeline; the inner call is
executed, checked and recorded as any other call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..catalog.registry import Catalog, Tool
from ..core.errors import ConfigurationError, ToolError
from ..core.values import Principal, ToolCall, ToolResult
from ..policy.grants import may_use
from .meta import CALL_TOOL, CallFunction, call_tool_target, meta_tools
from .selector import META_TAG, Selector

__all__ = ["Unwrapper", "add_discovery"]


def add_discovery(
    catalog: Catalog,
    selector: Callable[[], Selector],
    call: CallFunction,
    *,
    principal: Principal | None,
    max_argument_bytes: int,
) -> tuple[list[Tool], Unwrapper]:
    """Add the three discovery tools to `catalog`, `call_tool` running its inner call by
    `call` (a keeper's `execute`); `selector` returns the index to search at each call.

    Args:
        catalog: The keeper's catalog.
        selector: Returns the keeper's search index.
        call: Runs a call through the keeper's pipeline.
        principal: Who a call that names nobody acts for (the keeper's default principal).
        max_argument_bytes: The keeper's limit of raw argument text.

    Returns:
        The tools added, and the `Unwrapper` of the keeper's `call_tool` proposals.

    Raises:
        ConfigurationError: a tool of the catalog already has one of those names.
    """
    tools = meta_tools(selector, call)
    for tool in tools:
        present = catalog.get(tool.spec.name)
        if present is not None and META_TAG not in present.spec.tags:
            raise ConfigurationError(
                f"a tool named {tool.spec.name!r} is already in the catalog; discovery "
                "needs that name for its own tool"
            )
    for tool in tools:
        catalog.add(tool)
    unwrapper = Unwrapper(
        call_tool=next(t for t in tools if t.spec.name == CALL_TOOL),
        catalog=catalog,
        selector=selector,
        principal=principal,
        max_argument_bytes=max_argument_bytes,
    )
    return tools, unwrapper


@dataclass(frozen=True, kw_only=True, slots=True)
class Unwrapper:
    """A keeper's `call_tool` proposals as the proposals they stand for, under the same call
    id: the inner call is then the call of record, so proposing the same `call_tool` again
    after its approval runs it (nested under a `call_tool` record of its own, the approval
    required would end that record and replay forever)."""

    call_tool: Tool
    """The keeper's own `call_tool`, as its catalog holds it."""
    catalog: Catalog
    """The keeper's catalog."""
    selector: Callable[[], Selector]
    """The keeper's search index, whose hard filter applies."""
    principal: Principal | None
    """Who a call that names nobody acts for (the keeper's default principal)."""
    max_argument_bytes: int
    """Larger raw arguments are left unparsed (the pipeline refuses them)."""

    def unwrap(self, call: ToolCall) -> ToolCall:
        """The call a `call_tool` proposal stands for; any other call, as it is.

        What `call_tool` itself must refuse (no `tools:call` grant, malformed arguments, a
        tool the principal may not use, said as for one that does not exist) is returned as
        it is, for its own pipeline to refuse.
        """
        tool = self.call_tool
        if call.name != tool.spec.name or self.catalog.get(call.name) is not tool:
            return call
        arguments: Any = call.arguments
        if isinstance(arguments, str):
            if len(arguments) > self.max_argument_bytes:
                return call  # (its own pipeline refuses it, unparsed)
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):  # (nested too deep to parse: refused as such)
                return call
        principal = call.principal or self.principal
        if (
            principal is None
            or not isinstance(arguments, Mapping)
            or not may_use(principal, tool.spec)
        ):
            return call
        found = call_tool_target(
            arguments, principal=principal, selector=self.selector, catalog=self.catalog
        )
        if isinstance(found, ToolError):
            return call
        inner, inner_arguments = found
        return ToolCall(
            call_id=call.call_id,
            name=inner.spec.name,
            arguments=inner_arguments,
            task_id=call.task_id,
            principal=call.principal,
            metadata={**call.metadata, "via": tool.spec.name},
        )

    @staticmethod
    def as_called(call: ToolCall, inner: ToolCall, result: ToolResult) -> ToolResult:
        """The result of `inner` (what `unwrap` made of `call`) answering `call` as proposed:
        a vendor pairs an answer with the name it called (Gemini), so it names `call_tool`;
        the tool that ran is in `metadata["tool"]`."""
        if inner is call:
            return result
        return msgspec.structs.replace(
            result, tool=call.name, metadata={**result.metadata, "tool": inner.name}
        )
