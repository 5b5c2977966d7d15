"""Ledgers full of history for `toolkeeper bench console`: many calls, many approvals.

Rows are the ledger's own encoding (`_rows.call_row`, `approval_row`), written in bulk
(SQLite `executemany` in one transaction; PostgreSQL `COPY`), after the store created its
schema and indexes, so every index is as it would be after a long life. What it is not: a
realistic workload (no executor runs): only what reading pages of the ledger needs.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core.states import CallStatus
from ..ledger._rows import APPROVAL_COLUMNS, CALL_COLUMNS, approval_row, call_row
from ..ledger.base import ApprovalRecord, ApprovalStatus, CallRecord

__all__ = ["Shape", "approval_rows", "call_rows", "fill_postgres", "fill_sqlite"]

_STATES = (
    [CallStatus.SUCCEEDED] * 900
    + [CallStatus.FAILED] * 50
    + [CallStatus.REJECTED] * 40
    + [CallStatus.AWAITING_APPROVAL] * 8
    + [CallStatus.UNKNOWN_OUTCOME] * 2
)
"""How calls end, per thousand."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """What the ledger holds."""

    calls: int
    """Calls in all."""
    approvals: int
    """Approval requests in all (1 in 100 of them pending)."""
    tools: int = 50
    """Distinct tools."""
    principals: int = 200
    """Distinct principals."""
    start: float = 1.7e9
    """When the first call was made (epoch seconds); one call a second after it."""

    def tool(self, n: int) -> str:
        """The name of tool `n`."""
        return f"svc{n % self.tools}.op{n % 7}"

    def principal(self, n: int) -> str:
        """The id of principal `n`."""
        return f"user-{n % self.principals}"


def call_rows(shape: Shape, seed: int = 7) -> Iterator[tuple[Any, ...]]:
    """Every call of `shape`, oldest first, as rows of `calls`."""
    pick = random.Random(seed)
    for n in range(shape.calls):
        status = pick.choice(_STATES)
        at = shape.start + n
        history: tuple[tuple[CallStatus, float], ...] = ((status, at),)
        if status is not CallStatus.AWAITING_APPROVAL:
            history = ((CallStatus.RUNNING, at), (status, at + 0.2))
        failed = status in (CallStatus.FAILED, CallStatus.REJECTED)
        record = CallRecord(
            task_id=f"task-{n // 20}",
            call_id=f"call-{n}",
            tool=shape.tool(pick.randrange(1000)),
            version="1",
            digest=f"{n:064x}",
            arguments={"id": n, "note": "bench"},
            principal_id=shape.principal(pick.randrange(1000)),
            tenant="default",
            status=status,
            effect="write",
            idempotent=False,
            idempotency_key=f"tk-{n}",
            attempt=1,
            result={"ok": n} if status is CallStatus.SUCCEEDED else None,
            error={"code": "TOOL_ERROR", "message": "failed"} if failed else None,
            owner="bench:1",
            created_at=at,
            updated_at=history[-1][1],
            history=history,
        )
        yield call_row(record).values


def approval_rows(shape: Shape) -> Iterator[tuple[Any, ...]]:
    """Every approval of `shape`, each for one of the last calls, oldest first."""
    first = max(shape.calls - shape.approvals, 0)
    for n in range(shape.approvals):
        pending = n % 100 == 99
        made = shape.start + first + n
        record = ApprovalRecord(
            id=f"apr_{n:012x}",
            task_id=f"task-{(first + n) // 20}",
            call_id=f"call-{first + n}",
            tool=shape.tool(n),
            version="1",
            principal_id=shape.principal(n),
            digest=f"{n:064x}",
            arguments={"id": n},
            reason="destructive",
            status=ApprovalStatus.PENDING if pending else ApprovalStatus.APPROVED,
            created_at=made,
            expires_at=None,
            decided_by=None if pending else "operator:bench",
            decided_at=None if pending else made + 30,
        )
        yield approval_row(record)


def _batches(rows: Iterator[tuple[Any, ...]], size: int = 20_000) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def fill_sqlite(path: str, shape: Shape) -> None:
    """Write `shape` into the SQLite ledger at `path` (its schema made already)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        marks = ", ".join("?" * len(CALL_COLUMNS))
        insert = f"INSERT INTO calls ({', '.join(CALL_COLUMNS)}) VALUES ({marks})"
        for batch in _batches(call_rows(shape)):
            conn.executemany(insert, batch)
        marks = ", ".join("?" * len(APPROVAL_COLUMNS))
        insert = f"INSERT INTO approvals ({', '.join(APPROVAL_COLUMNS)}) VALUES ({marks})"
        conn.executemany(insert, approval_rows(shape))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()


def fill_postgres(url: str, schema: str, shape: Shape) -> None:
    """Write `shape` into the PostgreSQL ledger in `schema` (its tables made already)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        with conn.cursor() as cur:
            with cur.copy(f"COPY calls ({', '.join(CALL_COLUMNS)}) FROM STDIN") as copy:
                for row in call_rows(shape):
                    copy.write_row(row)
            with cur.copy(f"COPY approvals ({', '.join(APPROVAL_COLUMNS)}) FROM STDIN") as copy:
                for row in approval_rows(shape):
                    copy.write_row(row)
        conn.execute("ANALYZE calls")
        conn.execute("ANALYZE approvals")
