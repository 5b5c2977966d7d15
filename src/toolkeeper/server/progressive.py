"""Progressive exposure: the gateway lists the three discovery meta-tools of
`toolkeeper.retrieval.meta` (`search_tools`, `get_tool_details`, `call_tool`) instead of its
tools.

The meta-tools rank and describe only what the principal may use (the selector's hard filter),
and `call_tool` hands its inner call back to the gateway, which runs it through the executor
like a direct `tools/call` (same derived call id, so an approval of the inner call is found
again when the same `call_tool` is repeated). The meta-tools themselves are not catalog tools:
they change nothing, so they are answered here without a ledger record of their own.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..catalog.registry import Tool
from ..core.errors import ConfigurationError, ErrorCode, ToolError
from ..core.signals import ToolFailed
from ..core.states import CallStatus
from ..core.values import CallContext, Principal, ToolCall, ToolResult, ToolSpec
from ..keeper import Keeper
from ..retrieval.meta import (
    CALL_TOOL,
    META_TOOL_NAMES,
    call_tool_target,
    invalid_arguments,
    meta_specs,
    meta_tools,
)
from ..retrieval.selector import Connected, Selector

__all__ = ["MetaTools"]

_log = logging.getLogger("toolkeeper")

Run = Callable[[ToolCall], Awaitable[ToolResult]]
"""Runs an inner call through the executor for its principal."""


class MetaTools:
    """The meta-tools over one keeper's catalog; the search index is built on first use."""

    def __init__(self, keeper: Keeper, run: Run, *, connected: Connected | None = None) -> None:
        self._keeper = keeper
        self._run = run
        self._connected = connected
        """Whether a tool source is connected now: tools of one that is not are never shown."""
        self._tools: dict[str, Tool] | None = None
        self._selector: Selector | None = None
        self._closed = False
        self._specs = tuple(meta_specs())

    def specs(self) -> tuple[ToolSpec, ...]:
        """The three meta-tools."""
        return self._specs

    def is_meta(self, name: str) -> bool:
        """Whether `name` is one of the meta-tools."""
        return name in META_TOOL_NAMES

    def close(self) -> None:
        """Close the search index, if one was built (it follows the catalog and holds the
        vector cache open); idempotent. Searches are refused from then on."""
        self._closed = True
        selector, self._selector, self._tools = self._selector, None, None
        if selector is not None:
            selector.close()

    def _built(self) -> tuple[dict[str, Tool], Selector]:
        if self._closed:  # (an index built now would never be closed)
            raise ConfigurationError("the gateway is closed")
        if self._tools is None or self._selector is None:
            self._selector = _selector(self._keeper, self._connected)
            tools = meta_tools(self._selector, self._run, call_permission=None)
            self._tools = {t.name: t for t in tools}
        return self._tools, self._selector

    def target(
        self, principal: Principal, arguments: Mapping[str, Any]
    ) -> tuple[Tool, dict[str, Any]] | ToolResult:
        """The tool and arguments a `call_tool` call names, or its refusal: the gateway runs
        it as a direct call of that tool (approval questions included)."""
        _, selector = self._built()
        found = call_tool_target(
            arguments, principal=principal, selector=selector, catalog=self._keeper.catalog
        )
        if isinstance(found, ToolError):
            return _refused(CALL_TOOL, found)
        tool, inner = found
        return tool, dict(inner)

    async def call(
        self, principal: Principal, name: str, arguments: Mapping[str, Any]
    ) -> ToolResult:
        """Answer one meta-tool call for `principal`."""
        tools, _ = self._built()
        tool = tools[name]
        refused = invalid_arguments(tool.spec, arguments)
        if refused is not None:
            return _refused(name, refused)
        ctx = CallContext(
            call_id=f"meta-{uuid.uuid4().hex}",
            task_id=f"mcp:{principal.id}",
            tool=name,
            version=tool.spec.version,
            principal=principal,
            attempt=1,
            deadline=time.monotonic() + tool.spec.timeout,
            idempotency_key="",
            arguments=dict(arguments),
        )
        try:
            data = await tool.connector.invoke(tool.spec, arguments, ctx)
        except ToolFailed as failed:
            code = failed.code or ErrorCode.TOOL_ERROR
            return _refused(name, ToolError.of(code, failed.message))
        return ToolResult(call_id=ctx.call_id, tool=name, status=CallStatus.SUCCEEDED, data=data)


def _selector(keeper: Keeper, connected: Connected | None) -> Selector:
    """The bundled model with its vectors cached on disk (a restart does not embed the
    catalog again); keyword ranking alone when the model is not installed. Ranked and
    abstaining as the keeper's own `select` (its `selection` and `query_adapter`)."""
    try:
        return keeper.new_selector(connected=connected)
    except ImportError as exc:
        _log.warning(
            "search_tools ranks by keywords only, without abstention (%s); install "
            '"toolkeeper[retrieval]" for the bundled model',
            exc,
        )
        return keeper.new_selector(connected=connected, dense=False)


def _refused(name: str, error: ToolError) -> ToolResult:
    """A meta-tool's own refusal: no call was proposed, so there is no call id to name."""
    return ToolResult(call_id="", tool=name, status=CallStatus.REJECTED, error=error)
