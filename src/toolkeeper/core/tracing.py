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
    """The trace context (W3C `traceparent`, ...) the request carries to the service."""

    def ended(self, status_code: int | None, error_type: str | None) -> None:
        """The request got an answer with `status_code` (None: none came), or failed with
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
