"""OpenTelemetry: every call as a span (with its gate events) and counted in metrics, here read
back from the SDK's in-memory exporter and reader instead of sent to a collector.

    python examples/otel.py     # needs: pip install "toolkeeper[otel]"
"""

from __future__ import annotations

import sys

try:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError:
    print('skipped: this example needs the otel extra: pip install "toolkeeper[otel]"')
    sys.exit(0)

import anyio

from toolkeeper import Keeper, Principal, ToolCall
from toolkeeper.observe.otel import OpenTelemetry

EDITOR = Principal(id="editor", grants=frozenset({"docs:*"}))


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    telemetry = OpenTelemetry(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[metrics])
    )
    keeper = Keeper(ledger="memory://", telemetry=telemetry)

    @keeper.tool(effect="read_only", permissions=["docs:read"])
    def read_doc(doc_id: str) -> str:
        """The text of a document."""
        return f"the text of {doc_id}"

    @keeper.tool(effect="destructive", permissions=["docs:delete"])
    def delete_doc(doc_id: str) -> str:
        """Delete a document for good."""
        return "deleted"

    async with keeper:
        for call_id, name in [("c1", "read_doc"), ("c2", "delete_doc"), ("c3", "read_doc")]:
            call = ToolCall(
                call_id=call_id, name=name, arguments={"doc_id": "d-1"}, principal=EDITOR
            )
            await keeper.execute(call)

    for span in spans.get_finished_spans():
        attributes = dict(span.attributes or {})
        events = [event.name for event in span.events]
        print(
            f"span {span.name!r}: status={attributes.get('toolkeeper.call.status')} events={events}"
        )
    data = metrics.get_metrics_data()
    assert data is not None
    counted = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "toolkeeper.calls"
        for point in metric.data.data_points
        if isinstance(point, NumberDataPoint)
    ]
    for point in counted:
        tags = dict(point.attributes or {})
        tool, status = tags["gen_ai.tool.name"], tags["toolkeeper.call.status"]
        print(f"toolkeeper.calls{{{tool}, {status}}} = {point.value}")


if __name__ == "__main__":
    anyio.run(main)
