"""OpenTelemetry traces and metrics of every call (extra `toolkeeper[otel]`).

One span per call (`execute_tool {tool}`, after the GenAI semantic conventions) with the gates'
decisions as events, one child span per attempt (current while the connector runs, so a tool's
own spans nest under it), its W3C trace context handed to connectors that call a service
(`CallContext.trace`), and under it one CLIENT span per request a connector sends
(`CallContext.requests`: `GET /pets/{petId}` after the HTTP semantic conventions, `tools/call
echo` after MCP's), whose context the request carries. Metrics: `toolkeeper.calls` (a counter
by tool, status and error code) and `toolkeeper.call.duration` (a histogram, seconds).
Attributes name the call, its tool, task and principal, a request's method, server and route,
never argument values or results.

    keeper = Keeper(telemetry=OpenTelemetry())  # the global providers, or pass your own
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import Token
from typing import Any

from ..core.extras import MissingExtra

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.propagate import get_global_textmap
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover (the extra is installed in tests)
    raise MissingExtra("otel", "OpenTelemetry (toolkeeper.observe.otel)") from exc

from ..core.errors import ErrorCode, ToolError
from ..core.states import CallStatus
from ..core.tracing import RequestTrace
from ..core.values import Principal, ToolCall, ToolResult

__all__ = ["MAX_SERIES", "OpenTelemetry"]

_log = logging.getLogger("toolkeeper")
_SCOPE = "toolkeeper"
_MAX_TEXT = 256
"""The most characters of a name or id an attribute holds (they come from the model)."""
_UNKNOWN_TOOL = "(unknown)"
"""The tool a metric names for a call to no tool: the model's name would grow the series."""
_OTHER = "(other)"
MAX_SERIES = 2000
"""The most (tool, status, code) series the metrics hold; calls of other tools beyond them
are counted under the tool `(other)` (a refused call's name is the model's: it must not grow
the series without bound)."""
_OK = frozenset({CallStatus.SUCCEEDED, CallStatus.AWAITING_APPROVAL})
_OK_VALUES = frozenset(s.value for s in _OK)
_STATUS = {s: s.value for s in CallStatus}
_CODE = {c: c.value for c in ErrorCode}
"""Each status's and code's text (an enum's `.value` costs a descriptor call)."""
_UNKNOWN_TOOL_CODE = ErrorCode.UNKNOWN_TOOL.value


def _text(value: object) -> str:
    if not isinstance(value, str):
        return f"<{type(value).__name__}>"
    return value if len(value) <= _MAX_TEXT else value[:_MAX_TEXT] + "…"


class OpenTelemetry:
    """The `Telemetry` that reports to OpenTelemetry.

    Args:
        tracer_provider: Where spans go; default the global one (`trace.set_tracer_provider`).
        meter_provider: Where metrics go; default the global one.
        propagator: How trace context is written into upstream requests; default the global
            one (W3C `traceparent` and `baggage` unless configured otherwise).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self._tools: dict[str, _Tool] = {}
        """What each tool's spans and series are named, made once (at most `MAX_SERIES`)."""
        self._series: dict[tuple[str, str, str], dict[str, str]] = {}
        """The metric attributes of each (tool, status, code), made once."""
        self._counts: dict[tuple[str, str, str], int] = {}
        """Calls so far by (tool, status, code), which `toolkeeper.calls` reports when read:
        a dict increment per call where a synchronous counter costs tens of microseconds."""
        meter.create_observable_counter(
            "toolkeeper.calls",
            callbacks=[self._observe_calls],
            unit="{call}",
            description="Tool calls by tool, status and code",
        )
        self.duration = meter.create_histogram(
            "toolkeeper.call.duration", unit="s", description="Tool calls' duration"
        )
        self._propagator = propagator

    def start(self, call: ToolCall, principal: Principal | None) -> _CallSpan:
        """Open the span of one call."""
        name = call.name
        tool = self._tools.get(name) if type(name) is str else None
        if tool is None:
            tool = self._tool(name)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": _text(call.call_id),
            "toolkeeper.task.id": _text(call.task_id),
        }
        if principal is not None:
            attributes["toolkeeper.principal.id"] = _text(principal.id)
            attributes["toolkeeper.tenant"] = _text(principal.tenant)
        try:
            span = self._tracer.start_span(tool.span, attributes=attributes)
        except Exception:  # (telemetry must not fail a call)
            _log.exception("OpenTelemetry failed to start the span of a call")
            span = trace.INVALID_SPAN
        return _CallSpan(self, span, tool)

    def _tool(self, name: object) -> _Tool:
        tool = _Tool(_text(name))
        if type(name) is str and len(name) <= _MAX_TEXT and len(self._tools) < MAX_SERIES:
            self._tools[name] = tool
        return tool

    def _client_span(
        self, parent: Span, name: str, attributes: dict[str, Any], status: str
    ) -> RequestTrace:
        try:
            span = self._tracer.start_span(
                name,
                context=trace.set_span_in_context(parent),
                kind=SpanKind.CLIENT,
                attributes=attributes,
            )
            headers = self._inject(trace.set_span_in_context(span))
        except Exception:  # (telemetry must not fail a call)
            _log.exception("OpenTelemetry failed to start the span of a request")
            return _RequestSpan(trace.INVALID_SPAN, {}, status)
        return _RequestSpan(span, headers, status)

    def _inject(self, context: Context) -> dict[str, str]:
        headers: dict[str, str] = {}
        (self._propagator or get_global_textmap()).inject(headers, context=context)
        return headers

    def _observe_calls(self, options: CallbackOptions) -> Iterable[Observation]:
        counts = self._counts.copy()  # (a reader's thread may call while calls end)
        for (tool, status, code), n in counts.items():
            yield Observation(n, _metric_attributes(tool, status, code))


class _Tool:
    """A tool's name as attributes hold it and its spans' names."""

    __slots__ = ("attempt", "name", "span")

    def __init__(self, name: str) -> None:
        self.name = name
        self.span = f"execute_tool {name}"
        self.attempt = f"execute_tool {name} attempt"


class _CallSpan:
    """The `CallTrace` of one call: its span, and the span of the attempt under way.

    Each method catches what the SDK raises and logs it: telemetry must not fail a call."""

    __slots__ = ("_attempt", "_began", "_owner", "_span", "_token", "_tool")

    def __init__(self, owner: OpenTelemetry, span: Span, tool: _Tool) -> None:
        self._owner = owner
        self._span = span
        self._tool = tool
        self._began = time.perf_counter()
        self._attempt: Span | None = None
        self._token: Token[Context] | None = None

    def request(
        self, method: str, url: str, *, server: str, port: int | None, template: str | None
    ) -> RequestTrace:
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "server.address": server,
            "url.full": url,
        }
        if port is not None:
            attributes["server.port"] = port
        if template is not None:
            attributes["url.template"] = template
        name = f"{method} {template}" if template else method
        return self._owner._client_span(self._parent(), name, attributes, _HTTP_STATUS)

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
        attributes: dict[str, Any] = {"mcp.method.name": method, "network.transport": transport}
        name = method
        if tool is not None:
            attributes["gen_ai.tool.name"] = tool = _text(tool)
            attributes["gen_ai.operation.name"] = "execute_tool"
            name = f"{method} {tool}"
        if server is not None:
            attributes["server.address"] = server
        if port is not None:
            attributes["server.port"] = port
        if protocol_version is not None:
            attributes["mcp.protocol.version"] = protocol_version
        return self._owner._client_span(self._parent(), name, attributes, _RPC_STATUS)

    def _parent(self) -> Span:
        return self._attempt if self._attempt is not None else self._span

    def decided(self, gate: str, decision: str, error: ToolError | None = None) -> None:
        try:
            code = _CODE[error.code] if error is not None else None
            event = _EVENTS.get((gate, decision, code)) or _event(gate, decision, code)
            self._span.add_event(event[0], event[1])
        except Exception:
            _log.exception(_SDK_FAILED)

    def attempt_started(self, number: int) -> Mapping[str, str] | None:
        owner = self._owner
        try:
            attempt = owner._tracer.start_span(
                self._tool.attempt,
                context=trace.set_span_in_context(self._span),
                attributes=(
                    _ATTEMPTS[number] if number < len(_ATTEMPTS) else {"toolkeeper.attempt": number}
                ),
            )
            self._attempt = attempt
            current = trace.set_span_in_context(attempt)
            self._token = otel_context.attach(current)
        except Exception:
            _log.exception(_SDK_FAILED)
            return None
        return _TraceHeaders(owner, current)

    def attempt_ended(self, number: int, status: CallStatus, error: ToolError | None) -> None:
        attempt, token = self._attempt, self._token
        if attempt is None:
            return
        self._attempt = self._token = None
        try:
            if token is not None:
                otel_context.detach(token)
            if error is None and status in _OK:
                attempt.set_attribute("toolkeeper.call.status", _STATUS[status])
            else:
                attempt.set_attributes(
                    _failed(_STATUS[status], _CODE[error.code] if error else None)
                )
                if status not in _OK:
                    attempt.set_status(_ERROR)
            attempt.end()
        except Exception:
            _log.exception(_SDK_FAILED)

    def ended(self, result: ToolResult | None) -> None:
        try:
            self._end(result)
        except Exception:
            _log.exception(_SDK_FAILED)

    def _end(self, result: ToolResult | None) -> None:
        span = self._span
        if self._attempt is not None:  # (interrupted between its start and end)
            self.attempt_ended(0, CallStatus.CANCELLED, None)
        code: str | None
        if result is None:
            status, code = _STATUS[CallStatus.CANCELLED], _CODE[ErrorCode.CANCELLED]
        else:
            status = _STATUS[result.status]
            code = _CODE[result.error.code] if result.error is not None else None
            if result.replayed:
                span.set_attribute("toolkeeper.call.replayed", True)
        if result is not None and code is None and result.status in _OK:
            span.set_attribute("toolkeeper.call.status", status)
        else:
            span.set_attributes(_failed(status, code))
            if result is None or result.status not in _OK:
                span.set_status(_ERROR)
        span.end()
        owner = self._owner
        tool = _UNKNOWN_TOOL if code == _UNKNOWN_TOOL_CODE else self._tool.name
        key = (tool, status, code or "")
        counts = owner._counts
        if key not in counts and len(counts) >= MAX_SERIES:
            key = (_OTHER, status, code or "")
        counts[key] = counts.get(key, 0) + 1
        series = owner._series.get(key)
        if series is None:  # (bounded as the counts are: one per key)
            series = owner._series[key] = _metric_attributes(*key)
        owner.duration.record(time.perf_counter() - self._began, series)


_HTTP_STATUS = "http.response.status_code"
_RPC_STATUS = "rpc.response.status_code"


class _RequestSpan:
    """The `RequestTrace` of one request: its CLIENT span."""

    __slots__ = ("_span", "_status", "headers")

    def __init__(self, span: Span, headers: Mapping[str, str], status: str) -> None:
        self._span = span
        self._status = status
        self.headers = headers

    def ended(self, status_code: int | None, error_type: str | None) -> None:
        try:
            span = self._span
            if status_code is not None:
                if self._status == _HTTP_STATUS:
                    span.set_attribute(_HTTP_STATUS, status_code)
                    if status_code >= 400 and error_type is None:
                        error_type = str(status_code)
                else:  # (a JSON-RPC error's code: a string, after MCP's conventions)
                    span.set_attribute(_RPC_STATUS, str(status_code))
                    error_type = error_type or str(status_code)
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(_ERROR)
            span.end()
        except Exception:
            _log.exception(_SDK_FAILED)


_SDK_FAILED = "OpenTelemetry failed; the call goes on"
_ERROR = Status(StatusCode.ERROR)
_EVENTS: dict[tuple[str, str, str | None], tuple[str, dict[str, str]]] = {}
"""Each (gate, decision, code)'s event name and attributes, made once (bounded: gates and
codes are the pipeline's, not the model's)."""
_ATTEMPTS = [{"toolkeeper.attempt": n} for n in range(16)]
"""The attributes of attempt n, made once (the SDK copies what it is given)."""


def _event(gate: str, decision: str, code: str | None) -> tuple[str, dict[str, str]]:
    attributes = {"toolkeeper.gate": gate}
    if code is not None:
        attributes["toolkeeper.error.code"] = code
    event = (f"toolkeeper.gate.{decision}", attributes)
    if len(_EVENTS) < 1024:
        _EVENTS[gate, decision, code] = event
    return event


def _failed(status: str, code: str | None) -> dict[str, str]:
    """The attributes of a call or attempt that did not succeed (or succeeded with an error),
    made once per (status, code) (the SDK copies what it is given)."""
    attributes = _FAILED_ATTRIBUTES.get((status, code))
    if attributes is None:
        attributes = {"toolkeeper.call.status": status}
        if code is not None:
            attributes["toolkeeper.error.code"] = code
        if status not in _OK_VALUES:
            attributes["error.type"] = code or status
        _FAILED_ATTRIBUTES[status, code] = attributes  # (statuses and codes are enums)
    return attributes


_FAILED_ATTRIBUTES: dict[tuple[str, str | None], dict[str, str]] = {}


class _TraceHeaders(Mapping[str, str]):
    """An attempt's trace context headers, written by the propagator when first read (a
    local tool never reads them)."""

    __slots__ = ("_context", "_headers", "_owner")

    def __init__(self, owner: OpenTelemetry, context: Context) -> None:
        self._owner = owner
        self._context = context
        self._headers: dict[str, str] | None = None

    def _written(self) -> dict[str, str]:
        if self._headers is None:
            try:
                self._headers = self._owner._inject(self._context)
            except Exception:  # (telemetry must not fail a call)
                _log.exception("OpenTelemetry failed to write the trace context")
                self._headers = {}
        return self._headers

    def __getitem__(self, name: str) -> str:
        return self._written()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._written())

    def __len__(self) -> int:
        return len(self._written())


def _metric_attributes(tool: str, status: str, code: str) -> dict[str, str]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "toolkeeper.call.status": status,
        "toolkeeper.error.code": code,
    }
