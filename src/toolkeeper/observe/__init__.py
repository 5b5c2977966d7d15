"""Audit events and redaction of sensitive arguments."""

from .audit import AuditEvent, AuditSink, JsonlAuditSink, MemoryAuditSink, NullAuditSink
from .redact import REDACTED, redact, sensitive_pointers

__all__ = [
    "REDACTED",
    "AuditEvent",
    "AuditSink",
    "JsonlAuditSink",
    "MemoryAuditSink",
    "NullAuditSink",
    "redact",
    "sensitive_pointers",
]
