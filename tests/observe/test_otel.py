"""OpenTelemetry spans, events and metrics of calls, captured by the SDK's in-memory exporter
and reader; trace context received by a real HTTP service; spans of a call through the gateway
over streamable HTTP with the official MCP client."""

import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from toolkeeper import (
    CallContext,
    CallStatus,
    ErrorCode,
    Keeper,
    RetryLater,
    RetryPolicy,
    ToolCall,
)
from toolkeeper.config import parse_config
from toolkeeper.connectors._http_guard import AddressPolicy
from toolkeeper.connectors._openapi import openapi_operations
from toolkeeper.connectors.http import HttpParams, HttpSource
from toolkeeper.connectors.mcp import McpUpstream, UpstreamParams
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.observe.otel import OpenTelemetry
from toolkeeper.server import build

from ..conftest import APP
from ..connectors.http_service import PETS_OPENAPI, running_service
from ..server.conftest import TOKENS, config_text, connected, serving

pytestmark = pytest.mark.anyio

SECRET = "hunter2-card-4111"
UPSTREAM = str(Path(__file__).parents[1] / "connectors" / "upstream_server.py")


@dataclass
class Captured:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    telemetry: OpenTelemetry

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans.get_finished_spans())

    def counted(self) -> dict[tuple[str, str, str], int]:
        data = self.metrics.get_metrics_data()
        counts: dict[tuple[str, str, str], int] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != "toolkeeper.calls":
                        continue
                    for point in metric.data.data_points:
                        a = point.attributes or {}
                        key = (
                            str(a["gen_ai.tool.name"]),
                            str(a["toolkeeper.call.status"]),
                            str(a["toolkeeper.error.code"]),
                        )
                        counts[key] = int(point.value)  # type: ignore[union-attr]
        return counts


@pytest.fixture
def captured() -> Captured:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    telemetry = OpenTelemetry(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    return Captured(spans, reader, telemetry)


@pytest.fixture
async def keeper(captured: Captured) -> AsyncIterator[Keeper]:
    retry = RetryPolicy(initial_interval=0.0, max_attempts=3, jitter=0.0)
    async with Keeper(
        ledger="memory://", principal=APP, retry=retry, telemetry=captured.telemetry
    ) as k:
        yield k


def _only(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def _started_under(span: ReadableSpan, parent: ReadableSpan) -> bool:
    """Whether `span` is a child of `parent`."""
    return (
        span.parent is not None
        and parent.context is not None
        and span.parent.span_id == parent.context.span_id
    )


async def test_a_read_call_is_a_span_with_genai_attributes_and_no_argument_values(
    keeper: Keeper, captured: Captured
) -> None:
    @keeper.tool(effect="read_only")
    async def lookup(card: str) -> str:
        return "found"

    call = ToolCall(call_id="c1", name="lookup", arguments={"card": SECRET}, task_id="t9")
    result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED
    spans = captured.finished()
    span = _only(spans, "execute_tool lookup")
    attempt = _only(spans, "execute_tool lookup attempt")
    assert span.attributes is not None
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
        "toolkeeper.task.id": "t9",
        "toolkeeper.principal.id": APP.id,
        "toolkeeper.tenant": APP.tenant,
        "toolkeeper.call.status": "SUCCEEDED",
    }
    assert span.status.status_code is StatusCode.UNSET
    assert _started_under(attempt, span)
    assert [e.name for e in span.events] == ["toolkeeper.gate.admitted"]
    everything = repr([(s.attributes, [e.attributes for e in s.events]) for s in spans])
    assert SECRET not in everything
    assert captured.counted() == {("lookup", "SUCCEEDED", ""): 1}


async def test_a_refused_call_carries_the_gates_decision_as_an_event(
    keeper: Keeper, captured: Captured
) -> None:
    @keeper.tool(effect="read_only")
    async def square(n: int) -> int:
        return n * n

    result = await keeper.execute(ToolCall(call_id="c1", name="square", arguments={"n": "x"}))
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    spans = captured.finished()
    (span,) = spans  # nothing ran: no attempt
    (event,) = span.events
    assert event.name == "toolkeeper.gate.refused"
    assert event.attributes == {
        "toolkeeper.gate": "validate",
        "toolkeeper.error.code": "INVALID_ARGUMENTS",
    }
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["toolkeeper.error.code"] == "INVALID_ARGUMENTS"
    assert captured.counted() == {("square", "REJECTED", "INVALID_ARGUMENTS"): 1}


async def test_a_retried_call_has_a_span_per_attempt(keeper: Keeper, captured: Captured) -> None:
    @keeper.tool(effect="read_only")
    async def fetch(ctx: CallContext) -> str:
        if ctx.attempt < 2:
            raise RetryLater("busy")
        return "data"

    result = await keeper.execute(ToolCall(call_id="c1", name="fetch"))
    assert result.ok and result.attempt == 2
    attempts = [s for s in captured.finished() if s.name == "execute_tool fetch attempt"]
    assert [(s.attributes or {}).get("toolkeeper.attempt") for s in attempts] == [1, 2]
    assert [s.status.status_code for s in attempts] == [StatusCode.ERROR, StatusCode.UNSET]
    assert (attempts[0].attributes or {})["toolkeeper.error.code"] == "TOOL_ERROR"


async def test_a_call_to_no_tool_is_counted_under_one_name_not_the_models(
    keeper: Keeper, captured: Captured
) -> None:
    for i in range(3):
        await keeper.execute(ToolCall(call_id=f"c{i}", name=f"made_up_{i}"))
    assert captured.counted() == {("(unknown)", "REJECTED", "UNKNOWN_TOOL"): 3}


async def test_a_replayed_call_is_marked_as_one(keeper: Keeper, captured: Captured) -> None:
    @keeper.tool(effect="write")
    async def note(text: str) -> str:
        return text

    call = ToolCall(call_id="c1", name="note", arguments={"text": "x"})
    await keeper.execute(call)
    again = await keeper.execute(call)
    assert again.replayed
    spans = [s for s in captured.finished() if s.name == "execute_tool note"]
    assert [(s.attributes or {}).get("toolkeeper.call.replayed") for s in spans] == [None, True]
    assert [e.name for e in spans[1].events] == ["toolkeeper.gate.answered"]


@pytest.fixture
def pets() -> Iterator[Any]:
    with running_service() as service:
        yield service


async def _pets_call(captured: Captured, base_url: str, call: ToolCall, **options: Any) -> Any:
    params = HttpParams(
        base_url=base_url,
        name="pets",
        addresses=AddressPolicy.of(allow_networks=["127.0.0.1/32"]),
        **options,
    )
    retry = RetryPolicy(initial_interval=0.0, max_attempts=2, jitter=0.0)
    async with (
        HttpSource(params, openapi_operations(PETS_OPENAPI)) as source,
        Keeper(
            ledger="memory://", principal=APP, retry=retry, telemetry=captured.telemetry
        ) as keeper,
    ):
        for tool in source.tools:
            keeper.add(tool)
        return await keeper.execute(call)


async def test_an_http_request_is_a_client_span_whose_context_the_upstream_receives(
    captured: Captured, pets: Any
) -> None:
    call = ToolCall(call_id="c1", name="pets.getPet", arguments={"petId": SECRET, "verbose": True})
    result = await _pets_call(
        captured, pets.url, call, headers={"Authorization": "Bearer s3cr3t-tok"}
    )
    assert result.status is CallStatus.SUCCEEDED
    (seen,) = pets.seen
    spans = captured.finished()
    attempt = _only(spans, "execute_tool pets.getPet attempt")
    request = _only(spans, "GET /pets/{petId}")
    assert request.kind is SpanKind.CLIENT
    assert _started_under(request, attempt)
    assert dict(request.attributes or {}) == {
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
        "server.port": pets.port,
        "url.full": f"{pets.url}/pets/{{petId}}",
        "url.template": "/pets/{petId}",
        "http.response.status_code": 200,
    }
    assert request.status.status_code is StatusCode.UNSET
    context = request.context
    assert context is not None
    version, trace_id, parent_id, _flags = seen.headers["traceparent"].split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    everything = repr([(s.name, s.attributes, [e.attributes for e in s.events]) for s in spans])
    assert SECRET not in everything and "s3cr3t-tok" not in everything


async def test_an_http_request_answered_with_an_error_status_is_an_error_span(
    captured: Captured, pets: Any
) -> None:
    pets.answers["/pets/7"] = [(503, {"retry-after": "0"}, b"busy"), (404, {}, b"gone")]
    call = ToolCall(call_id="c1", name="pets.getPet", arguments={"petId": "7"})
    result = await _pets_call(captured, pets.url, call)
    assert result.status is CallStatus.FAILED
    spans = captured.finished()
    requests = [s for s in spans if s.name == "GET /pets/{petId}"]
    attempts = [s for s in spans if s.name == "execute_tool pets.getPet attempt"]
    assert len(requests) == len(attempts) == 2  # a span per attempt, and one per request
    assert [(s.attributes or {}).get("http.response.status_code") for s in requests] == [
        503,
        404,
    ]
    assert [(s.attributes or {}).get("error.type") for s in requests] == ["503", "404"]
    assert all(s.status.status_code is StatusCode.ERROR for s in requests)
    for request, attempt in zip(requests, attempts, strict=True):
        assert _started_under(request, attempt)


async def test_an_http_request_that_gets_no_answer_names_the_error(captured: Captured) -> None:
    with running_service() as gone:
        url = gone.url  # (closed: nothing listens there any more)
    call = ToolCall(call_id="c1", name="pets.getPet", arguments={"petId": "7"})
    result = await _pets_call(captured, url, call)
    assert result.status is CallStatus.FAILED
    requests = [s for s in captured.finished() if s.name == "GET /pets/{petId}"]
    assert requests and all(s.status.status_code is StatusCode.ERROR for s in requests)
    assert {(s.attributes or {}).get("error.type") for s in requests} == {"ConnectError"}
    assert all("http.response.status_code" not in (s.attributes or {}) for s in requests)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_mcp_request_is_a_client_span_whose_context_the_upstream_receives(
    keeper: Keeper, captured: Captured, protocol: Literal["auto", "legacy"]
) -> None:
    # auto: the connector's own lane; legacy: the SDK's session (as over streamable HTTP)
    params = UpstreamParams(
        trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,), protocol=protocol
    )
    with anyio.fail_after(30):
        async with McpUpstream(params, keeper.catalog) as upstream:
            result = await keeper.execute(
                ToolCall(call_id="c1", name="t.echo", arguments={"text": SECRET})
            )
            version = upstream.protocol_version
    assert result.status is CallStatus.SUCCEEDED
    spans = captured.finished()
    attempt = _only(spans, "execute_tool t.echo attempt")
    request = _only(spans, "tools/call echo")
    assert request.kind is SpanKind.CLIENT
    assert _started_under(request, attempt)
    assert dict(request.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
        "mcp.protocol.version": version,
    }
    assert request.status.status_code is StatusCode.UNSET
    _version, trace_id, parent_id, _flags = result.data["traceparent"].split("-")
    assert request.context is not None and trace_id == f"{request.context.trace_id:032x}"
    if protocol == "auto":  # (the SDK's session may add its own span, when one is global)
        assert parent_id == f"{request.context.span_id:016x}"
    everything = repr([(s.name, s.attributes, [e.attributes for e in s.events]) for s in spans])
    assert SECRET not in everything


async def test_an_mcp_request_over_streamable_http_names_its_server(
    keeper: Keeper, captured: Captured, tmp_path: Path
) -> None:
    # the upstream: the tests' gateway, over streamable HTTP
    config = parse_config(config_text(tmp_path, upstream=False), file="t.toml")
    async with build(config) as deployment, serving(deployment) as url:
        params = UpstreamParams(
            trust_hints=True,
            name="gw",
            url=url,
            headers={"Authorization": f"Bearer {TOKENS['bob']}"},
        )
        with anyio.fail_after(30):
            async with McpUpstream(params, keeper.catalog):
                result = await keeper.execute(ToolCall(call_id="c1", name="gw.demo.list_notes"))
    assert result.status is CallStatus.SUCCEEDED
    spans = captured.finished()
    attempt = _only(spans, "execute_tool gw.demo.list_notes attempt")
    request = _only(spans, "tools/call demo.list_notes")
    assert _started_under(request, attempt)
    attributes = request.attributes or {}
    assert attributes["network.transport"] == "tcp"
    assert attributes["server.address"] == "127.0.0.1"
    assert f":{attributes['server.port']}/" in url


async def test_an_mcp_request_that_gets_no_answer_is_an_error_span(
    keeper: Keeper, captured: Captured, tmp_path: Path
) -> None:
    params = UpstreamParams(trust_hints=True, name="t", command=sys.executable, args=(UPSTREAM,))
    with anyio.fail_after(30):
        async with McpUpstream(params, keeper.catalog):
            result = await keeper.execute(
                ToolCall(
                    call_id="c1",
                    name="t.die_midway",
                    arguments={"path": str(tmp_path / "marker")},
                )
            )
    assert result.status is CallStatus.UNKNOWN_OUTCOME
    (request,) = [s for s in captured.finished() if s.name == "tools/call die_midway"]
    assert request.status.status_code is StatusCode.ERROR
    attributes = request.attributes or {}
    assert attributes.get("error.type") and "rpc.response.status_code" not in attributes


async def test_a_keeper_without_telemetry_sends_no_traceparent(pets: Any) -> None:
    params = HttpParams(
        name="pets", base_url=pets.url, addresses=AddressPolicy.of(allow_networks=["127.0.0.1/32"])
    )
    async with (
        HttpSource(params, openapi_operations(PETS_OPENAPI)) as source,
        Keeper(ledger="memory://", principal=APP) as keeper,
    ):
        for tool in source.tools:
            keeper.add(tool)
        await keeper.execute(ToolCall(call_id="c1", name="pets.getPet", arguments={"petId": "7"}))
    (seen,) = pets.seen
    assert "traceparent" not in seen.headers


_GLOBAL = InMemorySpanExporter()


def _global_spans() -> InMemorySpanExporter:
    """The process's global tracer provider, set once, exporting to `_GLOBAL` (what the
    gateway's `telemetry = "otel"` reports to)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_GLOBAL))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    _GLOBAL.clear()
    return _GLOBAL


async def test_a_call_through_the_gateway_is_traced(tmp_path: Path) -> None:
    spans = _global_spans()
    text = config_text(tmp_path, upstream=False).replace(
        "[server]\n", '[server]\ntelemetry = "otel"\n', 1
    )
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))
    async with (
        build(config) as deployment,
        serving(deployment) as url,
        connected(url, TOKENS["bob"]) as bob,
    ):
        await bob.call_tool("demo.list_notes", {})
    finished = tuple(spans.get_finished_spans())
    span = _only(finished, "execute_tool demo.list_notes")
    attempt = _only(finished, "execute_tool demo.list_notes attempt")
    assert _started_under(attempt, span)
    assert [e.name for e in span.events][-1] == "toolkeeper.gate.admitted"
    assert span.attributes is not None
    assert span.attributes["toolkeeper.principal.id"] == "bob"
    assert span.attributes["toolkeeper.call.status"] == "SUCCEEDED"


def test_a_gateway_without_telemetry_observes_nothing(tmp_path: Path) -> None:
    config = parse_config(config_text(tmp_path, upstream=False), file="t.toml")
    assert config.server.telemetry == "off"


def test_an_unknown_telemetry_kind_is_a_configuration_error(tmp_path: Path) -> None:
    text = config_text(tmp_path, upstream=False).replace(
        "[server]\n", '[server]\ntelemetry = "zipkin"\n', 1
    )
    with pytest.raises(ConfigurationError):
        parse_config(text, file="t.toml")


def test_without_the_extra_the_import_error_names_it() -> None:
    import subprocess

    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "try:\n    import toolkeeper.observe.otel\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "toolkeeper[otel]"' in out.stdout


def test_importing_toolkeeper_imports_no_opentelemetry() -> None:
    import subprocess
    import sys

    code = "import sys, toolkeeper, toolkeeper.observe; print('opentelemetry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_call_cancelled_while_it_runs_ends_its_span_and_its_attempts(
    keeper: Keeper, captured: Captured, caplog: pytest.LogCaptureFixture
) -> None:
    started = anyio.Event()

    @keeper.tool(effect="read_only")
    async def slow() -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(keeper.execute, ToolCall(call_id="c1", name="slow"))
            await started.wait()
            tg.cancel_scope.cancel()
    spans = captured.finished()
    call, attempt = _only(spans, "execute_tool slow"), _only(spans, "execute_tool slow attempt")
    assert (call.attributes or {})["toolkeeper.call.status"] == "CANCELLED"
    assert (attempt.attributes or {})["toolkeeper.call.status"] == "CANCELLED"
    assert call.status.status_code is attempt.status.status_code is StatusCode.ERROR
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


async def test_a_huge_or_strange_tool_name_is_cut_not_copied(
    keeper: Keeper, captured: Captured
) -> None:
    await keeper.execute(ToolCall(call_id="c1", name="x" * 100_000))
    (span,) = captured.finished()
    name = str((span.attributes or {})["gen_ai.tool.name"])
    assert name.startswith("xxx") and len(name) <= 257
    assert captured.counted() == {("(unknown)", "REJECTED", "UNKNOWN_TOOL"): 1}


async def test_metric_series_stay_bounded_however_many_tools_are_called(
    keeper: Keeper, captured: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolkeeper.observe.otel.MAX_SERIES", 2)
    for i in range(4):
        keeper.add_function(add, name=f"add_{i}", effect="read_only")
        await keeper.execute(ToolCall(call_id=f"c{i}", name=f"add_{i}", arguments={"a": 1}))
    assert captured.counted() == {
        ("add_0", "SUCCEEDED", ""): 1,
        ("add_1", "SUCCEEDED", ""): 1,
        ("(other)", "SUCCEEDED", ""): 2,
    }


async def add(a: int) -> int:
    return a + 1


class Failing(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor down")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor down")


async def test_telemetry_that_fails_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    provider = TracerProvider()
    provider.add_span_processor(Failing())
    telemetry = OpenTelemetry(tracer_provider=provider, meter_provider=MeterProvider())
    async with Keeper(ledger="memory://", principal=APP, telemetry=telemetry) as keeper:
        keeper.add_function(add, effect="read_only")
        result = await keeper.execute(ToolCall(call_id="c1", name="add", arguments={"a": 1}))
    assert result.status is CallStatus.SUCCEEDED and result.data == 2
    assert {r.name for r in caplog.records if r.levelname == "ERROR"} == {"toolkeeper"}


async def test_a_call_held_for_approval_carries_the_hold_as_an_event(
    keeper: Keeper, captured: Captured
) -> None:
    @keeper.tool(effect="destructive")
    async def drop(table: str) -> str:
        return "dropped"

    result = await keeper.execute(ToolCall(call_id="c1", name="drop", arguments={"table": "t"}))
    assert result.status is CallStatus.AWAITING_APPROVAL
    (span,) = captured.finished()
    assert [(e.name, (e.attributes or {}).get("toolkeeper.gate")) for e in span.events] == [
        ("toolkeeper.gate.held", "approval")
    ]
    assert span.status.status_code is StatusCode.UNSET
