"""Test doubles shipped with toolkeeper, so users never patch internals."""

from ..ledger.memory import MemoryStore
from ..observe.audit import MemoryAuditSink
from .clock import FakeClock

__all__ = ["FakeClock", "MemoryAuditSink", "MemoryStore"]
