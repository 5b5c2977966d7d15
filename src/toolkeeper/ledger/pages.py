"""Pages of calls, newest first, for the people who read the ledger (`LedgerStore.page_calls`).

What it is: the filter (`CallQuery`), the keyset cursor (`CallCursor`: the last call of a page,
so the next page starts strictly after it, however many calls were added meanwhile) and the SQL
the two SQL stores share. Each filter has its index (migration 4), so the first page of a
million calls costs what the first page of ten does, and no request counts the table. What it
is not: `list_calls`, which lists oldest first for the runtime (recovery, budgets).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..core.states import CallStatus
from .base import CallRecord

__all__ = [
    "MAX_PAGE",
    "CallCursor",
    "CallQuery",
    "matches",
    "moment",
    "newest_first",
    "page_calls_query",
]

MAX_PAGE = 500
"""The most calls one page holds."""


_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def moment(text: str, now: float) -> float:
    """A time as `CallQuery.since` and `before` take it (epoch seconds), from epoch seconds,
    an ISO 8601 time (`2026-12-02T07:00:00Z`, `2026-12-02`; UTC when it names no zone), or
    a span before `now`: a number and s, m, h, d or w (`90s`, `15m`, `1h`, `2d`, `1w`).

    Raises:
        ValueError: `text` is none of these, or no finite time.
    """
    text = text.strip()
    ago = _AGO.fullmatch(text)
    if ago is not None:
        at = now - float(ago[1]) * _UNIT[ago[2]]
    else:
        try:
            at = float(text)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                raise ValueError(
                    f"{text!r} is no time: give an ISO 8601 time (2026-12-02T07:00:00Z), "
                    "epoch seconds, or a span ago such as 15m, 1h, 2d"
                ) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            at = parsed.timestamp()
    if not math.isfinite(at):
        raise ValueError(f"{text!r} is no finite time")
    return at


@dataclass(frozen=True, kw_only=True, slots=True)
class CallCursor:
    """Where a page ended: its last call's creation time and key."""

    created_at: float
    """When that call was first written (epoch seconds)."""
    task_id: str
    """Its task."""
    call_id: str
    """Its id."""

    @classmethod
    def of(cls, record: CallRecord) -> CallCursor:
        """The cursor just past `record`."""
        return cls(created_at=record.created_at, task_id=record.task_id, call_id=record.call_id)

    def encode(self) -> str:
        """An opaque URL-safe token for the next page."""
        raw = json.dumps([self.created_at, self.task_id, self.call_id], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> CallCursor:
        """The cursor `encode` made.

        Raises:
            ValueError: `token` is not one.
        """
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            at, task_id, call_id = json.loads(raw)
        except (ValueError, TypeError, binascii.Error) as exc:
            raise ValueError("not a cursor of this ledger") from exc
        if not (
            isinstance(at, int | float)
            and not isinstance(at, bool)
            and math.isfinite(at)
            and isinstance(task_id, str)
            and isinstance(call_id, str)
        ):
            raise ValueError("not a cursor of this ledger")
        return cls(created_at=float(at), task_id=task_id, call_id=call_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class CallQuery:
    """Which calls a page holds; every filter given must match."""

    status: CallStatus | None = None
    """Only calls in this state."""
    tool: str | None = None
    """Only calls of this tool."""
    principal_id: str | None = None
    """Only calls made for this principal."""
    task_id: str | None = None
    """Only calls of this task."""
    call_id: str | None = None
    """Only calls with this id (in any task)."""
    since: float | None = None
    """Only calls created at or after this time (epoch seconds)."""
    before: float | None = None
    """Only calls created before this time (epoch seconds)."""
    after: CallCursor | None = None
    """Only calls older than this cursor (the previous page's end)."""
    limit: int = 50
    """The most calls on the page, 1 to `MAX_PAGE`."""

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_PAGE:
            raise ValueError(f"a page holds 1 to {MAX_PAGE} calls, not {self.limit}")


def _key(record: CallRecord) -> tuple[float, str, str]:
    return (record.created_at, record.task_id, record.call_id)


def matches(record: CallRecord, query: CallQuery) -> bool:
    """Whether `record` belongs on a page of `query` (ignoring its limit)."""
    fields = (
        (query.status, record.status),
        (query.tool, record.tool),
        (query.principal_id, record.principal_id),
        (query.task_id, record.task_id),
        (query.call_id, record.call_id),
    )
    if any(wanted is not None and wanted != value for wanted, value in fields):
        return False
    if query.since is not None and record.created_at < query.since:
        return False
    if query.before is not None and record.created_at >= query.before:
        return False
    after = query.after
    return after is None or _key(record) < (after.created_at, after.task_id, after.call_id)


def newest_first(records: Iterable[CallRecord], query: CallQuery) -> list[CallRecord]:
    """The page of `query` among `records` (what a store without SQL answers)."""
    found = [r for r in records if matches(r, query)]
    found.sort(key=_key, reverse=True)
    return found[: query.limit]


def page_calls_query(select: str, query: CallQuery) -> tuple[str, tuple[Any, ...]]:
    """SQL (`?` placeholders) and parameters of one page; `select` selects from `calls c`."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("c.status", None if query.status is None else query.status.value),
        ("c.tool", query.tool),
        ("c.principal_id", query.principal_id),
        ("c.task_id", query.task_id),
        ("c.call_id", query.call_id),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if query.since is not None:
        where.append("c.created_at >= ?")
        params.append(query.since)
    if query.before is not None:
        where.append("c.created_at < ?")
        params.append(query.before)
    if query.after is not None:
        # A row value, which both planners walk as a range of the (…, created_at, task_id,
        # call_id) indexes.
        where.append("(c.created_at, c.task_id, c.call_id) < (?, ?, ?)")
        params.extend((query.after.created_at, query.after.task_id, query.after.call_id))
    sql = select
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY c.created_at DESC, c.task_id DESC, c.call_id DESC LIMIT ?"
    params.append(query.limit)
    return sql, tuple(params)
