"""The ledger: the durable record of every call and every approval.

`LedgerStore` is the Protocol; `MemoryStore` (tests, scripts), `SQLiteStore` (the embedded
default) and `PostgresStore` (several processes or hosts) implement it, and `open_store` picks
one from a URL. `store.page_calls(CallQuery(...))` lists calls newest first, by time
(`since`, `before`) and filters, a page at a time (`CallCursor`). `recover_abandoned` turns
the RUNNING calls of crashed processes into UNKNOWN_OUTCOME. `PostgresStore` is imported on
first use, so `import toolkeeper` never imports psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    ApprovalRecord,
    ApprovalStatus,
    CallRecord,
    LedgerStore,
    RunRecord,
    StaleRun,
    StaleState,
    current_owner,
    is_abandoned,
)
from .factory import open_store
from .memory import MemoryStore
from .pages import CallCursor, CallQuery
from .pins import PinRecord, PinStatus, PinStore
from .recovery import recover_abandoned
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "CallCursor",
    "CallQuery",
    "CallRecord",
    "LedgerStore",
    "MemoryStore",
    "PinRecord",
    "PinStatus",
    "PinStore",
    "PostgresStore",
    "RunRecord",
    "SQLiteStore",
    "StaleRun",
    "StaleState",
    "current_owner",
    "is_abandoned",
    "open_store",
    "recover_abandoned",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
