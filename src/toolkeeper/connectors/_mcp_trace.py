"""The span of each `tools/call` an MCP upstream connector sends, when telemetry is on
(`CallContext.requests`): opened before the request, its trace context put in the request's
`_meta` (MCP SEP-414), ended with how the request ended. What it is not: the spans themselves
(`toolkeeper.observe.otel`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from mcp.shared.exceptions import MCPError

from ..core.tracing import RequestTrace
from ..core.values import CallContext
from ._mcp_params import UpstreamParams

__all__ = ["request_span", "until_answered"]


def request_span(
    params: UpstreamParams, tool: str, ctx: CallContext, protocol_version: str | None
) -> RequestTrace | None:
    """The span of a `tools/call` of `tool` (the upstream's own name) about to be sent;
    None when telemetry is off."""
    tracer = ctx.requests
    if tracer is None:
        return None
    server: str | None = None
    port: int | None = None
    if params.url is not None:
        url = urlsplit(params.url)
        server = url.hostname
        port = url.port or (443 if url.scheme == "https" else 80)
    return tracer.mcp_request(
        "tools/call",
        tool,
        transport="pipe" if params.url is None else "tcp",
        server=server,
        port=port,
        protocol_version=protocol_version,
    )


@contextmanager
def until_answered(observed: RequestTrace | None) -> Iterator[None]:
    """Ends `observed` if the request fails: a JSON-RPC error with its code, anything else
    (no answer: a closed pipe, a timeout, a cancellation) with its type's name."""
    try:
        yield
    except BaseException as exc:
        if observed is not None:
            if isinstance(exc, MCPError):
                observed.ended(exc.code, None)
            else:
                observed.ended(None, type(exc).__name__)
        raise
