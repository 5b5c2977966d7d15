"""The operator's desk: everything the HTTP API and the web console let a person do, once.

What it is: approvals (listed, decided under four eyes), the ledger's pages and a call's
timeline, unknown outcomes (settled, reconciled), the audit trail, the catalog as a principal
sees it and what retrieval would show a model; each checked against the operator's role and
recorded with who decided. What it is not: a way to run a call: nothing here executes a tool,
and an approval only lets the client's next proposal of that exact call through the executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio.to_thread
import msgspec

from ..catalog.registry import CatalogEvent
from ..config_operators import Role
from ..core.states import CallStatus
from ..core.values import Principal, ToolSpec
from ..keeper import Keeper
from ..ledger.base import ApprovalRecord, ApprovalStatus, CallRecord
from ..ledger.pages import CallQuery
from ..observe.audit import AuditEvent
from ..policy.grants import may_use
from ..retrieval.selection import Selection
from .operators import Operator

__all__ = ["Desk", "DeskError", "VersionSeen", "trail"]


class DeskError(Exception):
    """A request the desk refuses: a stable `code` and the HTTP `status` it answers with."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message


@dataclass(frozen=True, kw_only=True, slots=True)
class VersionSeen:
    """One version of a tool, as the catalog announced it while the desk ran."""

    version: str
    """The tool's version."""
    kind: str
    """What happened: `present` at start, then `added`, `changed` or `removed`."""
    at: float
    """When (epoch seconds)."""


@dataclass(kw_only=True)
class Desk:
    """What operators may do with one keeper.

    Args:
        keeper: The keeper whose ledger, approvals and catalog are operated on.
        principals: The principals a catalog or search may be seen as, by id.
        connected: Whether each upstream (by name) is connected, for `health`.
    """

    keeper: Keeper
    principals: Mapping[str, Principal]
    connected: Callable[[], Mapping[str, bool]] = dict
    versions: dict[str, list[VersionSeen]] = field(default_factory=dict, init=False)
    """The versions of each tool seen since the desk opened (the last 20), by name."""
    _unsubscribe: Callable[[], None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        now = time.time()
        for spec in self.keeper.catalog.specs():
            self.versions[spec.name] = [VersionSeen(version=spec.version, kind="present", at=now)]
        self._unsubscribe = self.keeper.catalog.subscribe(self._seen)

    def _seen(self, event: CatalogEvent) -> None:
        seen = self.versions.setdefault(event.tool.name, [])
        seen.append(VersionSeen(version=event.tool.spec.version, kind=event.kind, at=time.time()))
        del seen[:-20]

    def close(self) -> None:
        """Stop following the catalog; idempotent."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # approvals ---------------------------------------------------------------------------

    async def approvals(self, status: ApprovalStatus | None, limit: int) -> list[ApprovalRecord]:
        """Requests in `status`, oldest first; pending ones past their expiry left out."""
        found = await self.keeper.store.list_approvals(status=status, limit=limit)
        if status is not ApprovalStatus.PENDING:
            return found
        now = time.time()
        return [r for r in found if not r.expired(now)]

    async def approval(self, approval_id: str) -> ApprovalRecord:
        """One request.

        Raises:
            DeskError: NOT_FOUND.
        """
        found = None if "\x00" in approval_id else await self.keeper.store.get_approval(approval_id)
        if found is None:
            raise DeskError("NOT_FOUND", 404, f"no approval request {approval_id!r}")
        return found

    async def approve(self, op: Operator, approval_id: str, note: str | None) -> ApprovalRecord:
        """Grant a pending request as `op`.

        Raises:
            DeskError: FORBIDDEN (role), FOUR_EYES (its own principal's call), NOT_FOUND,
                NOT_PENDING (decided or expired meanwhile).
        """
        _require(op, "approver")
        _storable(note)
        record = await self.approval(approval_id)
        if not op.may_approve_for(record.principal_id):
            raise DeskError(
                "FOUR_EYES",
                403,
                f"{record.principal_id!r} is one of {op.name!r}'s own principals: another "
                "operator must approve its calls",
            )
        return await self._decide(self.keeper.approvals.approve, approval_id, op, note=note)

    async def deny(self, op: Operator, approval_id: str, reason: str) -> ApprovalRecord:
        """Refuse a pending request as `op`; the call ends APPROVAL_DENIED with `reason`.

        Raises:
            DeskError: FORBIDDEN, INVALID_REQUEST (no reason), NOT_FOUND, NOT_PENDING.
        """
        _require(op, "approver")
        if not _storable(reason).strip():
            raise DeskError("INVALID_REQUEST", 422, "a denial needs a reason: the model is told")
        await self.approval(approval_id)
        return await self._decide(self.keeper.approvals.deny, approval_id, op, reason=reason)

    async def _decide(
        self, decide: Callable[..., Any], approval_id: str, op: Operator, **words: Any
    ) -> ApprovalRecord:
        try:
            record: ApprovalRecord = await decide(approval_id, by=op.decider, **words)
        except KeyError:
            raise DeskError("NOT_FOUND", 404, f"no approval request {approval_id!r}") from None
        except ValueError as exc:
            raise DeskError("NOT_PENDING", 409, str(exc)) from None
        return record

    # calls -------------------------------------------------------------------------------

    async def calls(self, query: CallQuery) -> list[CallRecord]:
        """One page of calls, newest first."""
        return await self.keeper.store.page_calls(query)

    async def call(self, task_id: str, call_id: str) -> tuple[CallRecord, ApprovalRecord | None]:
        """A call and the approval it waited for or used.

        Raises:
            DeskError: NOT_FOUND.
        """
        named = "\x00" not in task_id + call_id  # (no ledger holds one; PostgreSQL refuses it)
        record = await self.keeper.store.get_call(task_id, call_id) if named else None
        if record is None:
            raise DeskError("NOT_FOUND", 404, f"no call {call_id!r} in task {task_id!r}")
        approval = None
        if record.approval_id is not None:
            approval = await self.keeper.store.get_approval(record.approval_id)
        return record, approval

    async def settle(
        self, op: Operator, task_id: str, call_id: str, *, succeeded: bool, note: str
    ) -> CallRecord:
        """Record what `op` found out about an UNKNOWN_OUTCOME call.

        Raises:
            DeskError: FORBIDDEN, INVALID_REQUEST (no note), NOT_FOUND, NOT_UNKNOWN.
        """
        _require(op, "approver")
        if "\x00" in task_id + call_id:
            raise DeskError("NOT_FOUND", 404, f"no call {call_id!r} in task {task_id!r}")
        if not _storable(note).strip():
            raise DeskError("INVALID_REQUEST", 422, "say what you found: it is kept with the call")
        try:
            await self.keeper.settle(
                task_id, call_id, succeeded=succeeded, by=op.decider, note=note
            )
        except KeyError:
            raise DeskError("NOT_FOUND", 404, f"no call {call_id!r} in task {task_id!r}") from None
        except ValueError as exc:
            raise DeskError("NOT_UNKNOWN", 409, str(exc)) from None
        record, _ = await self.call(task_id, call_id)
        return record

    async def reconcile(self, op: Operator) -> list[CallRecord]:
        """Ask each unknown call's tool what happened; the calls settled.

        Raises:
            DeskError: FORBIDDEN (admins only).
        """
        _require(op, "admin")
        before = await self.keeper.unknown()
        await self.keeper.reconcile()
        settled = []
        for record in before:
            now = await self.keeper.store.get_call(record.task_id, record.call_id)
            if now is not None and now.status is not CallStatus.UNKNOWN_OUTCOME:
                settled.append(now)
        return settled

    async def audit(self, query: CallQuery) -> list[tuple[CallRecord, list[AuditEvent]]]:
        """The audit trail of the calls `query` selects, newest call first, each with its
        events newest first: each state it entered, and each decision on it with who made
        it."""
        out = []
        for record in await self.keeper.store.page_calls(query):
            approval = None
            if record.approval_id is not None:
                approval = await self.keeper.store.get_approval(record.approval_id)
            out.append((record, trail(record, approval)[::-1]))
        return out

    # catalog and retrieval ---------------------------------------------------------------

    def principal(self, principal_id: str) -> Principal:
        """A configured principal.

        Raises:
            DeskError: NOT_FOUND.
        """
        found = self.principals.get(principal_id)
        if found is None:
            raise DeskError("NOT_FOUND", 404, f"no principal {principal_id!r}")
        return found

    def tools(self, principal_id: str | None) -> list[ToolSpec]:
        """The catalog, or the part of it `principal_id` may use."""
        specs = self.keeper.catalog.specs()
        if principal_id is None:
            return specs
        who = self.principal(principal_id)
        return [s for s in specs if may_use(who, s)]

    async def search(self, query: str, principal_id: str, k: int) -> Selection:
        """What retrieval would show a model working for `principal_id` (ranked on a worker
        thread, as the gateway's `search_tools` is: the event loop serves others meanwhile)."""
        who = self.principal(principal_id)
        select = partial(self.keeper.select, query, principal=who, k=k)
        return await anyio.to_thread.run_sync(select, abandon_on_cancel=True)

    async def health(self) -> dict[str, Any]:
        """Whether the ledger answers and each upstream is connected."""
        try:
            await self.keeper.store.page_calls(CallQuery(limit=1))
            ledger = "ok"
        except Exception as exc:  # any failure of the store is what this reports
            ledger = f"unavailable: {type(exc).__name__}"
        upstreams = dict(self.connected())
        ok = ledger == "ok" and all(upstreams.values())
        return {"status": "ok" if ok else "degraded", "ledger": ledger, "upstreams": upstreams}


def _storable(text: str | None) -> str:
    """`text` (or ""), when every ledger can keep it: PostgreSQL refuses a NUL character."""
    if text is not None and "\x00" in text:
        raise DeskError("INVALID_REQUEST", 422, "a note cannot hold a NUL character")
    return text or ""


def _require(op: Operator, role: Role) -> None:
    if not op.may(role):
        raise DeskError("FORBIDDEN", 403, f"this needs the {role} role; {op.name} is {op.role}")


def trail(record: CallRecord, approval: ApprovalRecord | None) -> list[AuditEvent]:
    """A call's states in order, as audit events, with the decision on its approval and who
    settled it, if a person did."""

    def event(at: float, status: str, **more: Any) -> AuditEvent:
        return AuditEvent(
            at=at,
            task_id=record.task_id,
            call_id=record.call_id,
            tool=record.tool,
            version=record.version,
            principal_id=record.principal_id,
            tenant=record.tenant,
            status=status,
            approval_id=record.approval_id,
            **more,
        )

    events = []
    previous: str | None = None
    for status, at in record.history:
        events.append(event(at, status.value, previous=previous))
        previous = status.value
    if approval is not None and approval.decided_at is not None:
        by = {"by": approval.decided_by, "note": approval.note}
        events.append(event(approval.decided_at, f"approval {approval.status.value}", extra=by))
    if record.owner.startswith("person:"):
        by = {"by": record.owner.removeprefix("person:")}
        events.append(event(record.updated_at, f"settled {record.status.value}", extra=by))
    events.sort(key=lambda e: e.at)
    if record.error is not None and events:
        code, message = record.error.get("code"), record.error.get("message")
        events[-1] = msgspec.structs.replace(events[-1], error_code=code, message=message)
    return events
