"""Approvals bound to one exact call.

An approval request records the tool name and version, the principal, the task and call ids,
and the keyed digest (HMAC-SHA256, `ledger.keys`) of the canonical *validated arguments with
defaults applied*. Approving grants that digest and nothing else: at dispatch the digest is
recomputed from the arguments about to run and must match, so an approval for call A can
never run call B. Requests expire, can be denied with a reason, and live in the ledger store,
so they survive restarts.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..core.values import is_positive
from ..ledger.base import EVERY, ApprovalRecord, ApprovalStatus, LedgerStore

__all__ = ["ApprovalCheck", "Approvals", "Binding"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Binding:
    """What an approval is bound to."""

    task_id: str
    """Task of the call."""
    call_id: str
    """The call."""
    tool: str
    """Tool name."""
    version: str
    """Tool version."""
    principal_id: str
    """Who the call acts for."""
    digest: str
    """Keyed digest of the canonical validated arguments with defaults applied."""


class ApprovalCheck(StrEnum):
    """The state of an approval as seen by a call about to run."""

    GRANTED = "granted"
    PENDING = "pending"
    DENIED = "denied"
    EXPIRED = "expired"
    MISMATCH = "mismatch"
    """The approval exists but was given for different arguments, tool, version or principal."""


class Approvals:
    """Requests, decisions and checks of approvals, on top of a ledger store.

    Args:
        store: The ledger store the requests live in.
        ttl: Seconds a request stays valid once made; None: forever.
        clock: Wall clock (epoch seconds).
        ready: Awaited before a person's request (see `_ready`).

    Raises:
        ValueError: `ttl` is not None and not a positive, finite number of seconds (with 0 or
            less, every request would be born expired: no call needing one could ever run).
    """

    def __init__(
        self,
        store: Callable[[], LedgerStore],
        *,
        ttl: float | None = 24 * 3600.0,
        clock: Callable[[], float] = time.time,
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if ttl is not None and not is_positive(ttl):
            raise ValueError(
                "the approval ttl must be a positive, finite number of seconds, or None for "
                f"requests that never expire, not {ttl!r}"
            )
        self._store = store
        self._ttl = ttl
        self._clock = clock
        self._ready = ready
        """Awaited before a person's request (`get`, `pending`, a decision): `Keeper` opens
        itself there, as it does for a call."""

    async def _opened(self) -> LedgerStore:
        if self._ready is not None:
            await self._ready()
        return self._store()

    async def request(
        self, binding: Binding, *, arguments: Mapping[str, Any], reason: str
    ) -> ApprovalRecord:
        """Store a new pending request for exactly this call."""
        now = self._clock()
        record = ApprovalRecord(
            id="apr_" + secrets.token_hex(8),
            task_id=binding.task_id,
            call_id=binding.call_id,
            tool=binding.tool,
            version=binding.version,
            principal_id=binding.principal_id,
            digest=binding.digest,
            arguments=dict(arguments),
            reason=reason,
            created_at=now,
            expires_at=None if self._ttl is None else now + self._ttl,
        )
        return await self._store().create_approval(record)

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """One request, or None."""
        return await (await self._opened()).get_approval(approval_id)

    async def pending(self) -> list[ApprovalRecord]:
        """Requests waiting for a decision, oldest first, every one of them (expired ones are
        marked expired and left out)."""
        store = await self._opened()
        now = self._clock()
        out = []
        for record in await store.list_approvals(status=ApprovalStatus.PENDING, limit=EVERY):
            if record.expired(now):
                await _expire(store, record.id, now)
            else:
                out.append(record)
        return out

    async def approve(
        self, approval_id: str, *, by: str, note: str | None = None
    ) -> ApprovalRecord:
        """Grant a pending request.

        Raises:
            KeyError: no such request.
            ValueError: `by` names no one, or the request is not pending any more, or has
                expired.
        """
        return await self._decide(approval_id, ApprovalStatus.APPROVED, _named(by, "by"), note)

    async def withdraw(self, approval_id: str, *, reason: str) -> ApprovalRecord | None:
        """Take back a pending request nothing waits for any more; None when it was decided
        (or is gone) already."""
        try:
            return await self._decide(approval_id, ApprovalStatus.WITHDRAWN, "toolkeeper", reason)
        except (KeyError, ValueError):
            return None

    async def expire(self, approval_id: str) -> None:
        """Mark a pending request that a call found past its expiry as expired, so that a
        decision landing after it (a person whose clock, or write, was late) is refused as the
        call was (one decided first stays as it was)."""
        await _expire(self._store(), approval_id, self._clock())

    async def deny(self, approval_id: str, *, by: str, reason: str) -> ApprovalRecord:
        """Refuse a pending request; the call ends APPROVAL_DENIED with `reason`.

        Raises:
            KeyError: no such request.
            ValueError: `by` names no one or `reason` is empty (the model is told it), or
                the request is not pending any more.
        """
        by, reason = _named(by, "by"), _named(reason, "reason")
        return await self._decide(approval_id, ApprovalStatus.DENIED, by, reason)

    async def _decide(
        self, approval_id: str, status: ApprovalStatus, by: str | None, note: str | None
    ) -> ApprovalRecord:
        store = await self._opened()
        record = await store.get_approval(approval_id)
        if record is None:
            raise KeyError(approval_id)
        now = self._clock()
        if status is not ApprovalStatus.EXPIRED and record.expired(now):
            if record.status is ApprovalStatus.PENDING:
                await _expire(store, approval_id, now)
            raise ValueError(f"approval {approval_id} has expired")
        return await store.decide_approval(approval_id, status=status, by=by, note=note, at=now)

    def check(self, record: ApprovalRecord, binding: Binding) -> ApprovalCheck:
        """Whether `record` lets the call described by `binding` run now."""
        if (
            record.digest != binding.digest
            or record.tool != binding.tool
            or record.version != binding.version
            or record.principal_id != binding.principal_id
            or record.call_id != binding.call_id
            or record.task_id != binding.task_id
        ):
            return ApprovalCheck.MISMATCH
        if record.status is ApprovalStatus.DENIED:
            return ApprovalCheck.DENIED
        if record.status is ApprovalStatus.WITHDRAWN:
            return ApprovalCheck.MISMATCH  # nothing may run under it
        if record.status is ApprovalStatus.EXPIRED or record.expired(self._clock()):
            return ApprovalCheck.EXPIRED
        if record.status is ApprovalStatus.APPROVED:
            return ApprovalCheck.GRANTED
        return ApprovalCheck.PENDING


async def _expire(store: LedgerStore, approval_id: str, now: float) -> None:
    """Mark a pending request that has expired as expired, unless another process decided it
    first (a person, or a listing of its own that found it expired too): either way it is
    pending no more, and the decision that landed stands."""
    with contextlib.suppress(ValueError):
        await store.decide_approval(
            approval_id, status=ApprovalStatus.EXPIRED, by=None, note="expired", at=now
        )


def _named(value: str, what: str) -> str:
    """`value`, when it is text with something in it: a decision says who made it, and a
    denial why (what the audit trail and the model are shown)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a decision on an approval needs a non-empty {what}=")
    return value
