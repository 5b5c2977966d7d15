"""Audit events, redaction of sensitive arguments, and the detector of instruction-like text."""

from .audit import AuditEvent, AuditSink, JsonlAuditSink, MemoryAuditSink, NullAuditSink
from .redact import REDACTED, redact, sensitive_pointers
from .suspicious import Finding, scan_definition, scan_text

__all__ = [
    "REDACTED",
    "AuditEvent",
    "AuditSink",
    "Finding",
    "JsonlAuditSink",
    "MemoryAuditSink",
    "NullAuditSink",
    "redact",
    "scan_definition",
    "scan_text",
    "sensitive_pointers",
]
