"""An upstream's tools and their results as toolkeeper's values.

`spec_from_mcp` reads a listed tool into a `ToolSpec` (namespaced, guarded by a permission, its
effect the configuration's or, when trusted, the server's hints); `call_result` reads a raw
`tools/call` answer, `result_data` the data of a successful one. A call carries its
idempotency key in the request's `_meta`, under `IDEMPOTENCY_META_KEY`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import mcp_types
from pydantic import ValidationError

from ..core.signals import ToolFailed
from ..core.values import Effect, ToolSpec
from ..dialects.mcp import MCP
from ._mcp_errors import malformed_result
from ._mcp_params import ToolOverride, UpstreamParams

__all__ = ["IDEMPOTENCY_META_KEY", "call_result", "error_text", "result_data", "spec_from_mcp"]

IDEMPOTENCY_META_KEY = "dev.toolkeeper/idempotency-key"
"""The request `_meta` key carrying the call's idempotency key (reverse-DNS prefix, as the MCP
spec asks of non-protocol keys)."""

_DIALECT = MCP()


def spec_from_mcp(tool: mcp_types.Tool, params: UpstreamParams) -> ToolSpec:
    """The `ToolSpec` of an upstream tool: read by the MCP dialect (annotations become effect
    *hints*), then namespaced, guarded by a permission, and overridden by configuration.

    Its effect and idempotency are the configuration's (`params.tools`) where it states them,
    else the hints' when `params.trust_hints`, else the most restrictive reading: destructive
    and not idempotent (untrusted hints can only ever ask for that, so they are not read)."""
    override = params.tools.get(tool.name, ToolOverride())
    hinted = _DIALECT.import_tool(tool).value
    effect, idempotent = (
        (hinted.effect, hinted.idempotent) if params.trust_hints else (Effect.DESTRUCTIVE, False)
    )
    effect_from = (
        "configuration"
        if override.effect is not None
        else "mcp-annotations"
        if params.trust_hints
        else "untrusted-mcp-annotations"
    )
    return dataclasses.replace(
        hinted,
        name=f"{params.name}.{tool.name}",
        effect=override.effect or effect,
        idempotent=idempotent if override.idempotent is None else override.idempotent,
        permissions=(
            override.permissions
            if override.permissions is not None
            else params.default_permissions
            if params.default_permissions is not None
            else (f"{params.name}:{tool.name}",)
        ),
        tags=(params.name, *override.tags),
        timeout=override.timeout or params.timeout,
        tenants=params.tenants,
        environments=params.environments,
        source=params.name,
        fence=params.fence,
        metadata={
            **hinted.metadata,
            "effect_from": effect_from,
            "mcp": {"server": params.name, "name": tool.name},
        },
    )


def result_data(result: mcp_types.CallToolResult) -> Any:
    """The data of a successful result: its structured content, else its only text, else its
    content blocks as JSON objects."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if len(blocks) == 1 and isinstance(blocks[0], mcp_types.TextContent):
        return blocks[0].text
    return [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in blocks]


def error_text(result: mcp_types.CallToolResult) -> str:
    """What an `isError: true` result says: its texts, or that the tool reported an error."""
    texts = [b.text for b in result.content if isinstance(b, mcp_types.TextContent)]
    return "\n".join(texts) or "the upstream tool reported an error"


def call_result(raw: Mapping[str, Any]) -> mcp_types.CallToolResult:
    """The `CallToolResult` of a raw `tools/call` result.

    Raises:
        ToolFailed: the server asked for input (only a user could give it), or said in an
            answer that is not a `CallToolResult` that the call failed.
        UnrecordableResult: the server answered the call with something that is not a
            `CallToolResult`: the call ran (its effect may be done), its result is unreadable.
    """
    if raw.get("resultType", "complete") != "complete":
        kind = raw.get("resultType")
        raise ToolFailed(f"the upstream asked for input ({kind}), which a gateway call cannot give")
    try:
        return mcp_types.CallToolResult.model_validate(raw, by_name=False)
    except ValidationError as exc:
        if raw.get("isError") is True:
            raise ToolFailed("the upstream reported an error in a malformed result") from exc
        raise malformed_result(exc) from exc
