"""The observer a connector tells of each request it sends to a service (its span, when
telemetry is on): `CallContext.requests`. Implemented by `toolkeeper.observe.otel`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

__all__ = ["RequestTrace", "RequestTracer"]


@runtime_checkable
class RequestTrace(Protocol):
    """The observer of one request a connector sends (its span, of kind CLIENT)."""

    headers: Mapping[str, str]
    """The trace context (W3C `traceparent`, ...) the request carries to the service (an HTTP
    request in its headers, an MCP request in its `_meta`)."""

    def ended(self, status_code: int | None, error_type: str | None) -> None:
        """The request got an answer with `status_code` (HTTP: the status, None: no answer;
        MCP: a JSON-RPC error's code, None: a result or no answer), or failed with
        `error_type` (an exception's type name or an error code; None: it did not fail)."""
        ...


@runtime_checkable
class RequestTracer(Protocol):
    """Opens the observer of each request a connector sends during an attempt."""

    def request(
        self, method: str, url: str, *, server: str, port: int | None, template: str | None
    ) -> RequestTrace:
        """An HTTP request starts: `method` (`GET`), `url` (no credentials, no query, no
        argument values: the connector's to strip), `server` (host name) and `port`,
        `template` (the route, `/pets/{petId}`), if any. Must not raise."""
        ...

    def mcp_request(
        self,
        method: str,
        tool: str | None,
        *,
        transport: str,
        server: str | None,
        port: int | None,
        protocol_version: str | None,
    ) -> RequestTrace:
        """An MCP request starts: `method` (`tools/call`), the upstream's own name of the
        `tool` it calls (if any), `transport` (`pipe` for stdio, `tcp`), the `server` host name
        and `port` (over HTTP), the session's `protocol_version`. Must not raise."""
        ...
