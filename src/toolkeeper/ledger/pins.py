"""Pinned tool definitions in the ledger: one `PinRecord` per upstream tool.

What it is: the durable half of pinning (`policy.pins` decides): the model-visible definition
of each upstream tool as first accepted, by digest, and the changed definition an upstream
offers since, held until an operator accepts or rejects it. Kept with the ledger so that
pins survive restarts and every gateway process on one ledger holds the same ones. A record
changes only by compare-and-set on its revision (`put_pin`), so two processes that see one
change at once record it once.

`PinStore` is what a store offers for it; `MemoryStore`, `SQLiteStore` and `PostgresStore`
implement it (the SQL ones through the mixins here, on the `tool_pins` table of migration 4).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from ._group_commit import Mode
from .base import check_limit

__all__ = ["PinRecord", "PinStatus", "PinStore", "PostgresPins", "SQLitePins"]


class PinStatus(StrEnum):
    """Where a pinned tool stands."""

    PINNED = "pinned"
    """The upstream offers the pinned definition (or offered a change that was accepted)."""
    PENDING = "pending"
    """The upstream offers another definition, held until an operator decides."""
    REJECTED = "rejected"
    """An operator rejected the definition offered; the pinned one stays."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PinRecord:
    """One upstream tool's pinned definition, and the change it waits on, if any."""

    name: str
    """The tool's name in the catalog (`git.git_status`)."""
    source: str
    """The upstream it comes from."""
    status: PinStatus
    """Pinned, pending or rejected."""
    digest: str | None
    """SHA-256 of the canonical JSON of the pinned definition; None while the first
    definition of a tool waits to be accepted (the detector flagged it)."""
    definition: Mapping[str, Any] | None
    """The pinned model-visible definition: name, title, description, input and output
    schemas."""
    offered_digest: str | None = None
    """The digest of the definition offered since, when it differs."""
    offered: Mapping[str, Any] | None = None
    """That definition."""
    findings: tuple[Mapping[str, str], ...] = ()
    """What the detector flagged in the offered definition (or the first one)."""
    rev: int = 1
    """Revision, raised by every change: what `put_pin` compares."""
    created_at: float = 0.0
    """When the tool was first seen (epoch seconds)."""
    updated_at: float = 0.0
    """When the record last changed (epoch seconds)."""
    decided_by: str | None = None
    """Who last accepted or rejected a change."""
    history: tuple[Mapping[str, Any], ...] = ()
    """Every event, oldest first: `{"at", "event", "digest", "by"}` (pinned, held,
    accepted, rejected, restored)."""


@runtime_checkable
class PinStore(Protocol):
    """Pinned tool definitions in a ledger. Safe from many tasks and processes at once."""

    async def get_pin(self, name: str) -> PinRecord | None:
        """The pin of a tool, or None."""
        ...

    async def put_pin(self, record: PinRecord, *, expected_rev: int | None) -> bool:
        """Write `record`: a new pin when `expected_rev` is None (False when one exists), else
        in place of the stored one at revision `expected_rev` (False when it is at another,
        or gone). True when written."""
        ...

    async def list_pins(
        self, *, status: PinStatus | None = None, limit: int = 1000
    ) -> list[PinRecord]:
        """Pins in `status` (all when None), by name: at most `limit`.

        Raises:
            ValueError: `limit` is negative.
        """
        ...


PIN_COLUMNS = (
    "name",
    "source",
    "status",
    "digest",
    "definition",
    "offered_digest",
    "offered",
    "findings",
    "rev",
    "created_at",
    "updated_at",
    "decided_by",
    "history",
)

_SELECT = f"SELECT {', '.join(PIN_COLUMNS)} FROM tool_pins"
_INSERT = (
    f"INSERT INTO tool_pins ({', '.join(PIN_COLUMNS)}) VALUES "
    f"({', '.join('?' for _ in PIN_COLUMNS)}) ON CONFLICT (name) DO NOTHING"
)
_UPDATE = (
    "UPDATE tool_pins SET "
    + ", ".join(f"{c} = ?" for c in PIN_COLUMNS[1:])
    + " WHERE name = ? AND rev = ?"
)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def pin_row(record: PinRecord) -> tuple[Any, ...]:
    """The values of `PIN_COLUMNS` of a record."""
    return (
        record.name,
        record.source,
        record.status.value,
        record.digest,
        _dump(record.definition),
        record.offered_digest,
        _dump(record.offered),
        _dump(list(record.findings)),
        record.rev,
        record.created_at,
        record.updated_at,
        record.decided_by,
        _dump(list(record.history)),
    )


def pin_from_row(row: Sequence[Any]) -> PinRecord:
    """The record of a row of `PIN_COLUMNS`."""
    values = dict(zip(PIN_COLUMNS, row, strict=True))
    return PinRecord(
        name=values["name"],
        source=values["source"],
        status=PinStatus(values["status"]),
        digest=values["digest"],
        definition=json.loads(values["definition"]) if values["definition"] else None,
        offered_digest=values["offered_digest"],
        offered=json.loads(values["offered"]) if values["offered"] else None,
        findings=tuple(json.loads(values["findings"] or "[]")),
        rev=int(values["rev"]),
        created_at=float(values["created_at"]),
        updated_at=float(values["updated_at"]),
        decided_by=values["decided_by"],
        history=tuple(json.loads(values["history"] or "[]")),
    )


def _list_query(status: PinStatus | None, limit: int) -> tuple[str, tuple[Any, ...]]:
    check_limit(limit)
    limit = min(limit, 2**62)
    if status is None:
        return f"{_SELECT} ORDER BY name LIMIT ?", (limit,)
    return f"{_SELECT} WHERE status = ? ORDER BY name LIMIT ?", (status.value, limit)


def _write(record: PinRecord, expected_rev: int | None) -> tuple[str, tuple[Any, ...]]:
    row = pin_row(record)
    if expected_rev is None:
        return _INSERT, row
    return _UPDATE, (*row[1:], record.name, expected_rev)


class SQLitePins:
    """`PinStore` for `SQLiteStore` (its `_run` runs one operation on its connection)."""

    _run: Callable[..., Awaitable[Any]]

    async def get_pin(self, name: str) -> PinRecord | None:
        def op(conn: Any) -> PinRecord | None:
            row = conn.execute(f"{_SELECT} WHERE name = ?", (name,)).fetchone()
            return None if row is None else pin_from_row(row)

        found: PinRecord | None = await self._run(op)
        return found

    async def put_pin(self, record: PinRecord, *, expected_rev: int | None) -> bool:
        sql, params = _write(record, expected_rev)

        def op(conn: Any) -> bool:
            return bool(conn.execute(sql, params).rowcount == 1)

        written: bool = await self._run(op, Mode.WRITE)
        return written

    async def list_pins(
        self, *, status: PinStatus | None = None, limit: int = 1000
    ) -> list[PinRecord]:
        sql, params = _list_query(status, limit)

        def op(conn: Any) -> list[PinRecord]:
            return [pin_from_row(row) for row in conn.execute(sql, params)]

        found: list[PinRecord] = await self._run(op)
        return found


class PostgresPins:
    """`PinStore` for `PostgresStore` (its `_conn` lends a pooled connection)."""

    _conn: Callable[[], AbstractAsyncContextManager[Any]]

    async def get_pin(self, name: str) -> PinRecord | None:
        async with self._conn() as conn:
            cur = await conn.execute(f"{_SELECT} WHERE name = %s", (name,))
            row = await cur.fetchone()
        return None if row is None else pin_from_row(row)

    async def put_pin(self, record: PinRecord, *, expected_rev: int | None) -> bool:
        sql, params = _write(record, expected_rev)
        async with self._conn() as conn:
            cur = await conn.execute(sql.replace("?", "%s"), params)
            return bool(cur.rowcount == 1)

    async def list_pins(
        self, *, status: PinStatus | None = None, limit: int = 1000
    ) -> list[PinRecord]:
        sql, params = _list_query(status, limit)
        async with self._conn() as conn:
            cur = await conn.execute(sql.replace("?", "%s"), params)
            return [pin_from_row(row) for row in await cur.fetchall()]
