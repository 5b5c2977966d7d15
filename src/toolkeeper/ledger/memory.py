"""An in-memory ledger store: the reference semantics of `LedgerStore`, and the test double.

Nothing survives the process. Use `SQLiteStore` for anything that must.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, Self

from ..core.states import CallStatus
from .base import (
    ApprovalRecord,
    ApprovalStatus,
    BudgetHold,
    CallRecord,
    RunRecord,
    StaleRun,
    StaleState,
    check_limit,
    hold_counts,
)
from .pages import CallQuery, newest_first
from .pins import PinRecord, PinStatus
from .transitions import apply_checked, check_decision, check_transition, not_pending, stamp_new

__all__ = ["MemoryStore"]


class MemoryStore:
    """Calls and approvals in dictionaries. Safe within one event loop.

    Args:
        digest_key: The key of its argument digests (`ledger.keys`); None makes a random one,
            as nothing outlives the store.
    """

    def __init__(self, *, digest_key: bytes | None = None) -> None:
        self._calls: dict[tuple[str, str], CallRecord] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        self._holds: dict[tuple[str, str], dict[str, BudgetHold]] = {}
        self._runs: dict[str, RunRecord] = {}
        self._pins: dict[str, PinRecord] = {}
        self._digest_key = digest_key or secrets.token_bytes(32)

    def digest_key(self) -> bytes:
        """The key of this store's argument digests."""
        return self._digest_key

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Nothing to create."""

    async def aclose(self) -> None:
        """Nothing to release; the records stay readable."""

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        return self._calls.get((task_id, call_id))

    async def claim_call(self, record: CallRecord) -> tuple[CallRecord, bool]:
        key = (record.task_id, record.call_id)
        existing = self._calls.get(key)
        if existing is not None:
            return existing, False
        stored = stamp_new(record)
        self._calls[key] = stored
        return stored, True

    async def transition(
        self,
        task_id: str,
        call_id: str,
        *,
        expected: CallStatus,
        target: CallStatus,
        changes: Mapping[str, Any] | None = None,
        expected_attempt: int | None = None,
    ) -> CallRecord:
        key = (task_id, call_id)
        # What the call cannot become is said first, whatever the record, as the SQL stores do.
        checked = check_transition(expected, target, changes)
        record = self._calls[key]
        if record.status is not expected or (
            expected_attempt is not None and record.attempt != expected_attempt
        ):
            raise StaleState(expected, record.status)
        updated = apply_checked(record, target=target, checked=checked, now=time.time())
        self._calls[key] = updated
        return updated

    async def list_calls(
        self,
        *,
        statuses: Sequence[CallStatus] | None = None,
        task_id: str | None = None,
        limit: int = 1000,
    ) -> list[CallRecord]:
        check_limit(limit)
        wanted = set(statuses) if statuses is not None else None
        rows = [
            r
            for r in self._calls.values()
            if (wanted is None or r.status in wanted) and (task_id is None or r.task_id == task_id)
        ]
        rows.sort(key=lambda r: r.created_at)
        return rows[:limit]

    async def page_calls(self, query: CallQuery) -> list[CallRecord]:
        return newest_first(self._calls.values(), query)

    async def count_calls(
        self,
        task_id: str,
        *,
        tool: str | None = None,
        statuses: Sequence[CallStatus] | None = None,
        tenant: str | None = None,
    ) -> int:
        wanted = set(statuses) if statuses is not None else None
        return sum(
            1
            for r in self._calls.values()
            if r.task_id == task_id
            and (tool is None or r.tool == tool)
            and (tenant is None or r.tenant == tenant)
            and (wanted is None or r.status in wanted)
        )

    async def hold_budget(self, hold: BudgetHold) -> int | None:
        holds = self._holds.setdefault((hold.tenant, hold.task_id), {})
        for call_id, other in list(holds.items()):
            if not hold_counts(other, self._calls.get((hold.task_id, call_id)), hold.created_at):
                del holds[call_id]
        counted = set(hold.counted)
        calls = [
            r
            for r in self._calls.values()
            if r.task_id == hold.task_id
            and r.tenant == hold.tenant
            and r.call_id != hold.call_id
            and r.status in counted
        ]
        others = [h for call_id, h in holds.items() if call_id != hold.call_id]
        for index, (tool, limit) in enumerate(hold.limits):
            used = sum(1 for r in calls if tool is None or r.tool == tool)
            used += sum(1 for h in others if tool is None or h.tool == tool)
            if used >= limit:
                return index
        holds[hold.call_id] = hold
        return None

    async def create_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        if record.id in self._approvals:
            raise ValueError(f"approval {record.id} exists")
        self._approvals[record.id] = record
        return record

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        return self._approvals.get(approval_id)

    async def decide_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        by: str | None,
        note: str | None,
        at: float,
    ) -> ApprovalRecord:
        check_decision(status)
        record = self._approvals[approval_id]
        if record.status is not ApprovalStatus.PENDING:
            raise not_pending(record)
        decided = dataclasses.replace(
            record, status=status, decided_by=by, note=note, decided_at=at
        )
        self._approvals[approval_id] = decided
        return decided

    async def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 1000
    ) -> list[ApprovalRecord]:
        check_limit(limit)
        rows = [r for r in self._approvals.values() if status is None or r.status is status]
        rows.sort(key=lambda r: r.created_at)
        return rows[:limit]

    async def save_run(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        found = self._runs.get(record.run_id)
        actual = 0 if found is None else found.version
        if actual != expected_version:
            raise StaleRun(record.run_id, expected_version, None if found is None else actual)
        now = time.time()
        stored = dataclasses.replace(
            record,
            version=expected_version + 1,
            created_at=now if found is None else found.created_at,
            updated_at=now,
        )
        self._runs[record.run_id] = stored
        return stored

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def get_pin(self, name: str) -> PinRecord | None:
        return self._pins.get(name)

    async def put_pin(self, record: PinRecord, *, expected_rev: int | None) -> bool:
        current = self._pins.get(record.name)
        if (current is None) != (expected_rev is None):
            return False
        if current is not None and current.rev != expected_rev:
            return False
        self._pins[record.name] = record
        return True

    async def list_pins(
        self, *, status: PinStatus | None = None, limit: int = 1000
    ) -> list[PinRecord]:
        check_limit(limit)
        rows = sorted(
            (r for r in self._pins.values() if status is None or r.status is status),
            key=lambda r: r.name,
        )
        return rows[:limit]
