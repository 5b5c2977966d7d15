"""Reading the operators' API requests: query parameters and JSON bodies, checked.

Anything malformed is a `DeskError` (`INVALID_REQUEST`, 400 or 422) naming the parameter,
never a 500. What it is not: authentication (`api`) or the work itself (`desk`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from ..core.states import CallStatus
from ..ledger.base import ApprovalStatus, CallRecord
from ..ledger.pages import MAX_PAGE, CallCursor, CallQuery, moment
from .desk import DeskError

__all__ = [
    "ApproveBody",
    "DenyBody",
    "SearchBody",
    "SettleBody",
    "approval_status",
    "body",
    "call_query",
    "limit",
    "next_cursor",
]

UNKNOWN = CallStatus.UNKNOWN_OUTCOME
"""The state of the unknown-outcome queue."""

_TEXT = 4000
"""The longest note or reason kept (characters)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, hide_input_in_errors=True)


class ApproveBody(_Body):
    """`POST /approvals/{id}/approve`."""

    note: str | None = Field(default=None, max_length=_TEXT)
    """Why it was approved (kept with the decision)."""


class DenyBody(_Body):
    """`POST /approvals/{id}/deny`: `reason` (or `note`) is told to the model."""

    reason: str | None = Field(default=None, max_length=_TEXT)
    """Why it was denied."""
    note: str | None = Field(default=None, max_length=_TEXT)
    """Taken as the reason when `reason` is not given."""


class SettleBody(_Body):
    """`POST /calls/{task}/{call}/settle`."""

    succeeded: bool
    """Whether the call took effect."""
    note: str = Field(max_length=_TEXT)
    """What the operator found out."""


class SearchBody(_Body):
    """`POST /search`."""

    query: str = Field(min_length=1, max_length=_TEXT)
    """What the model's user asked."""
    principal: str = Field(min_length=1, max_length=200)
    """Whose view of the catalog."""
    k: int = Field(default=8, ge=1, le=50)
    """How many tools at most."""


Body = TypeVar("Body", bound=_Body)


async def body(request: Request, model: type[Body]) -> Body:
    """The request's JSON body as `model` (an empty body is `{}`).

    Raises:
        DeskError: INVALID_REQUEST (400: not a JSON object; 422: a field is wrong).
    """
    raw = await request.body()
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise DeskError("INVALID_REQUEST", 400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise DeskError("INVALID_REQUEST", 400, "the body is not a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise DeskError("INVALID_REQUEST", 422, f"{where}: {first['msg']}") from None


def _text(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if len(value) > 1000 or "\x00" in value:
        raise DeskError("INVALID_REQUEST", 422, f"{name}: too long, or holds a NUL")
    return value


def _time(params: Mapping[str, str], name: str) -> float | None:
    """Epoch seconds, an ISO 8601 time (UTC when it names no zone), or a span ago (`1h`)."""
    value = _text(params, name)
    if value is None:
        return None
    try:
        return moment(value, time.time())
    except ValueError:
        raise DeskError(
            "INVALID_REQUEST", 422, f"{name}: epoch seconds, an ISO 8601 time or a span ago (1h)"
        ) from None


def limit(params: Mapping[str, str], default: int = 50) -> int:
    """`limit`, 1 to `MAX_PAGE`."""
    value = _text(params, "limit")
    if value is None:
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise DeskError("INVALID_REQUEST", 422, f"limit: a whole number from 1 to {MAX_PAGE}")
    return int(value)


def _enum(value: str | None, kind: Any, name: str) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise DeskError("INVALID_REQUEST", 422, f"{name}: one of {known}") from None


def approval_status(params: Mapping[str, str]) -> ApprovalStatus | None:
    """`status` of an approvals listing: pending by default, `all` for every status."""
    value = _text(params, "status") or "pending"
    return None if value == "all" else _enum(value, ApprovalStatus, "status")


def call_query(params: Mapping[str, str], **fixed: Any) -> CallQuery:
    """A page of calls from `status`, `tool`, `principal`, `task`, `call`, `since`,
    `before`, `cursor` and `limit` (`fixed` overrides them)."""
    status = _text(params, "status")
    cursor = _text(params, "cursor")
    try:
        after = None if cursor is None else CallCursor.decode(cursor)
    except ValueError:
        raise DeskError("INVALID_REQUEST", 422, "cursor: not one this API returned") from None
    found: dict[str, Any] = {
        "status": _enum(status.upper() if status else None, CallStatus, "status"),
        "tool": _text(params, "tool"),
        "principal_id": _text(params, "principal"),
        "task_id": _text(params, "task"),
        "call_id": _text(params, "call"),
        "since": _time(params, "since"),
        "before": _time(params, "before"),
        "after": after,
        "limit": limit(params),
    }
    return CallQuery(**{**found, **fixed})


def next_cursor(records: list[CallRecord], query: CallQuery) -> str | None:
    """The cursor of the page after `records` (None when it is the last)."""
    if len(records) < query.limit:
        return None
    return CallCursor.of(records[-1]).encode()
