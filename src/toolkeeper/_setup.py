"""What a `Keeper`'s options make: each checked when the keeper is made, the ledger store a
URL or path names, and the audit sink and rate limiter it gets by default.

What it is not: the keeper itself; nothing here is opened or closed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from .core.errors import ConfigurationError
from .core.retry import RetryPolicy
from .core.values import Principal, is_count
from .ledger.base import LedgerStore
from .ledger.memory import MemoryStore
from .ledger.sqlite import SQLiteStore
from .observe.audit import AuditSink, JsonlAuditSink, MemoryAuditSink
from .policy.budgets import Budgets, MemoryRateLimiter

__all__ = ["check_options", "default_audit", "default_limiter", "open_store"]


def check_options(
    *,
    ledger: object,
    principal: object,
    audit: object,
    retry: object,
    budgets: object,
    rate_limiter: object,
    max_argument_bytes: object,
    tool_threads: object,
) -> None:
    """Refuse a `Keeper` option of the wrong type or value when the keeper is made: taken,
    it failed every call later (as an INTERNAL_ERROR, or a PAYLOAD_TOO_LARGE for any
    arguments), far from the mistake.

    Raises:
        ConfigurationError: which option is wrong, and what it takes.
    """
    kinds: list[tuple[str, object, tuple[type, ...], str]] = [
        ("ledger", ledger, (str, os.PathLike, LedgerStore), "a LedgerStore, a URL or a path"),
        ("principal", principal, (Principal, type(None)), "a toolkeeper.Principal"),
        ("audit", audit, (AuditSink, type(None)), "an AuditSink, such as JsonlAuditSink(path)"),
        ("retry", retry, (RetryPolicy, type(None)), "a toolkeeper.RetryPolicy"),
        ("budgets", budgets, (Budgets, type(None)), "a toolkeeper.Budgets"),
    ]
    for name, value, kind, what in kinds:
        if not isinstance(value, kind):
            kind_given = type(value).__name__
            raise ConfigurationError(f"Keeper({name}=...) takes {what}, not a {kind_given}")
    if not is_count(max_argument_bytes, 1):
        raise ConfigurationError("max_argument_bytes must be a whole number of bytes (1 or more)")
    if not is_count(tool_threads, 1):
        raise ConfigurationError("tool_threads must be a whole number of threads (1 or more)")
    if rate_limiter is not None and (
        not isinstance(budgets, Budgets) or budgets.calls_per_minute is None
    ):
        raise ConfigurationError(
            "rate_limiter takes its rate from budgets=Budgets(calls_per_minute=...); "
            "without one it would limit nothing"
        )


def open_store(ledger: LedgerStore | str | os.PathLike[str]) -> LedgerStore:
    """The store `ledger` names (a `Path` is a SQLite file), or `ledger` itself, a store."""
    if isinstance(ledger, os.PathLike):
        return SQLiteStore(os.fspath(ledger))
    if not isinstance(ledger, str):
        return ledger
    if ledger == "memory://":
        return MemoryStore()
    from .ledger.factory import open_store

    return open_store(ledger)


def default_audit(ledger: LedgerStore | str | os.PathLike[str], store: LedgerStore) -> AuditSink:
    """A JSON lines file beside a SQLite ledger file named by URL or path (however spelled),
    else events in memory (`memory://`, `sqlite:///:memory:`, PostgreSQL, a store object)."""
    named = isinstance(ledger, str | os.PathLike)
    if named and isinstance(store, SQLiteStore) and store.path != ":memory:":
        db = Path(store.path)
        return JsonlAuditSink(db.with_name(db.stem + ".audit.jsonl"))
    return MemoryAuditSink()


def default_limiter(clock: Callable[[], float]) -> MemoryRateLimiter:
    """The in-process rate limiter: on a clock the caller passed (a `FakeClock` then drives rate
    limits as it drives approvals and retries), else on monotonic time, which no change of the
    wall clock moves."""
    return MemoryRateLimiter() if clock is time.time else MemoryRateLimiter(clock)
