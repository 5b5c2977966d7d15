"""Test doubles shipped with toolkeeper, so users never patch internals."""

from ..ledger.memory import MemoryStore
from ..observe.audit import MemoryAuditSink
from .clock import FakeClock
from .scripted import ScriptedCall, ScriptedModel, scripted_call
from .vendor_server import Recorded, Reply, VendorServer

__all__ = [
    "FakeClock",
    "MemoryAuditSink",
    "MemoryStore",
    "Recorded",
    "Reply",
    "ScriptedCall",
    "ScriptedModel",
    "VendorServer",
    "scripted_call",
]
