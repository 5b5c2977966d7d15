"""Telemetry: what the executor tells an observer of its calls (traces, metrics).

The executor calls a `Telemetry` at its existing points: a call's start (`Telemetry.start`), a
gate's decision that stops or holds the call, each attempt's start and end, and the call's end
(`CallTrace`). A connector that calls a service tells it of each request it sends
(`CallContext.requests`, a `RequestTracer`). A keeper without one (the default) makes no call
at all. The OpenTelemetry implementation is `toolkeeper.observe.otel` (extra `toolkeeper[otel]`).

Contract: an observer is told identities, tool names, states and error codes, never argument
values or results; it must not raise (the executor catches nothing it raises) and must not block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from ..core.errors import ToolError
from ..core.states import CallStatus
from ..core.tracing import RequestTrace, RequestTracer
from ..core.values import Principal, ToolCall, ToolResult

__all__ = ["CallTrace", "RequestTrace", "RequestTracer", "Telemetry"]


@runtime_checkable
class CallTrace(RequestTracer, Protocol):
    """The observer of one call, from its proposal to its result."""

    def decided(self, gate: str, decision: str, error: ToolError | None = None) -> None:
        """A gate stopped the call (`decision`: refused, held, answered) or let it run
        (`admitted`, gate the last one passed)."""
        ...

    def attempt_started(self, number: int) -> Mapping[str, str] | None:
        """Attempt `number` starts; returns the trace context headers (W3C `traceparent`,
        `tracestate`) the connector passes to the service it calls, or None."""
        ...

    def attempt_ended(self, number: int, status: CallStatus, error: ToolError | None) -> None:
        """Attempt `number` ended with `status` (an attempt cancelled ends CANCELLED)."""
        ...

    def ended(self, result: ToolResult | None) -> None:
        """The call ended with `result`; None: it was cancelled or interrupted."""
        ...


@runtime_checkable
class Telemetry(Protocol):
    """Observes every call the executor runs (`Keeper(telemetry=...)`)."""

    def start(self, call: ToolCall, principal: Principal | None) -> CallTrace:
        """A call was proposed, acting for `principal` (None: it names none)."""
        ...
