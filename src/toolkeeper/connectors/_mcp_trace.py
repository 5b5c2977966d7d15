"""The span of each `tools/call` an MCP upstream connector sends, when telemetry is on
(`CallContext.requests`): opened before the request, its trace context put in the request's
`_meta` (MCP SEP-414), ended with how the request ended. What it is not: the spans themselves
(`toolkeeper.observe.otel`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.shared.exceptions import MCPError

from ..core.tracing import RequestTrace
from ..core.values import CallContext
from ._mcp_errors import no_answer
from ._mcp_params import UpstreamParams

__all__ = ["Endpoint", "request_span", "until_answered"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where an upstream's requests go, as a request span names it."""

    transport: str
    """`pipe` (stdio) or `tcp` (streamable HTTP)."""
    server: str | None = None
    port: int | None = None

    @classmethod
    def of(cls, params: UpstreamParams) -> Endpoint:
        if params.url is None:
            return cls("pipe")
        url = urlsplit(params.url)
        return cls("tcp", url.hostname, url.port or (443 if url.scheme == "https" else 80))


def request_span(
    endpoint: Endpoint, tool: str, ctx: CallContext, protocol_version: str | None
) -> RequestTrace | None:
    """The span of a `tools/call` of `tool` (the upstream's own name) about to be sent;
    None when telemetry is off."""
    tracer = ctx.requests
    if tracer is None:
        return None
    return tracer.mcp_request(
        "tools/call",
        tool,
        transport=endpoint.transport,
        server=endpoint.server,
        port=endpoint.port,
        protocol_version=protocol_version,
    )


@contextmanager
def until_answered(observed: RequestTrace | None) -> Iterator[None]:
    """Ends `observed` if the request fails: the server's JSON-RPC error with its code,
    anything else (no answer: a closed pipe or connection, a timeout, a cancellation) with a
    name for it."""
    try:
        yield
    except BaseException as exc:
        if observed is not None:
            _failed(observed, exc)
        raise


def _failed(observed: RequestTrace, exc: BaseException) -> None:
    if not isinstance(exc, MCPError):
        observed.ended(None, type(exc).__name__)
    elif (unanswered := no_answer(exc)) is not None:
        observed.ended(None, unanswered)
    else:
        observed.ended(exc.code, None)
