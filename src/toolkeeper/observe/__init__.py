"""Audit events, redaction of sensitive arguments, the detector of instruction-like text, and
the telemetry observer the executor calls (OpenTelemetry: `toolkeeper.observe.otel`)."""

from .audit import AuditEvent, AuditSink, JsonlAuditSink, MemoryAuditSink, NullAuditSink
from .redact import REDACTED, redact, sensitive_pointers
from .suspicious import Finding, scan_definition, scan_text
from .telemetry import CallTrace, RequestTrace, RequestTracer, Telemetry

__all__ = [
    "REDACTED",
    "AuditEvent",
    "AuditSink",
    "CallTrace",
    "Finding",
    "JsonlAuditSink",
    "MemoryAuditSink",
    "NullAuditSink",
    "RequestTrace",
    "RequestTracer",
    "Telemetry",
    "redact",
    "scan_definition",
    "scan_text",
    "sensitive_pointers",
]
