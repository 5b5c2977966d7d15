"""Reconciliation: settling the calls of one ledger whose outcome nobody knows.

What it is: the calls found UNKNOWN_OUTCOME (`recovery` marks them), asked about by their
tools' reconcilers or settled by a person, each change recorded by compare-and-set and sent as
an audit event. What it is not: a way to run a call again; nothing here executes a tool.
The runtime's idempotency key is given (`key`), so this layer imports nothing above it.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from ..catalog.registry import Catalog, Reconciler
from ..core.states import CallStatus
from ..core.values import CallContext, Principal, ToolResult
from ..observe.audit import AuditEvent
from ..schema.from_callable import NOT_JSON, json_data
from .base import EVERY, CallRecord, LedgerStore, StaleState
from .recovery import recover_abandoned, settle

__all__ = ["Reconciliation"]

_log = logging.getLogger("toolkeeper")


@dataclass(frozen=True, kw_only=True, slots=True)
class Reconciliation:
    """The unknown outcomes of one ledger: found, reconciled, settled, each change audited."""

    store: LedgerStore
    """The open ledger store."""
    catalog: Catalog
    """The tools whose reconcilers are asked, by name."""
    limiter: anyio.CapacityLimiter
    """The worker threads a sync reconciler runs in (those of the sync tools)."""
    key: Callable[[str, str], str]
    """The idempotency key of a call, by task id and call id (the runtime's)."""
    emit: Callable[[AuditEvent], None]
    """Sends an audit event; never raises."""
    clock: Callable[[], float]
    """Wall clock (epoch seconds)."""

    async def recover(self, given_up: dict[tuple[str, str], bool]) -> None:
        """Mark the calls of dead processes UNKNOWN_OUTCOME, and those of this process whose
        end the ledger failed to record (`given_up`, see `recover_abandoned`)."""
        found = await recover_abandoned(self.store, now=self.clock(), given_up=given_up)
        for record in found:
            self.audit(record, previous=CallStatus.RUNNING, by="recovery")

    async def unknown(self) -> list[CallRecord]:
        """The calls whose outcome is UNKNOWN_OUTCOME now."""
        return await self.store.list_calls(statuses=[CallStatus.UNKNOWN_OUTCOME], limit=EVERY)

    async def reconcile(self, records: list[CallRecord]) -> list[CallRecord]:
        """Ask the tool of each of `records` what really happened, by idempotency key.

        A call whose tool has no reconciler, or that was settled meanwhile, is not asked. A
        sync reconciler runs in a worker thread (`limiter`), each under its tool's timeout.
        A SUCCEEDED or FAILED `ToolResult` it returns is recorded, made JSON; one that
        raises, times out or finds what is not JSON data leaves its call unknown (logged).

        Returns:
            The records of the calls that were settled, as stored.
        """
        settled: list[CallRecord] = []
        for record in records:
            tool = self.catalog.get(record.tool)
            if tool is None or tool.reconcile is None:
                continue
            current = await self.store.get_call(record.task_id, record.call_id)
            if current is None or current.status is not CallStatus.UNKNOWN_OUTCOME:
                continue  # settled meanwhile (another process reconciles too): not asked again
            ctx = CallContext(
                call_id=record.call_id,
                task_id=record.task_id,
                tool=record.tool,
                version=record.version,
                # (rows written before ids had to be non-empty text still reconcile)
                principal=Principal(
                    id=record.principal_id or "unknown", tenant=record.tenant or "default"
                ),
                attempt=record.attempt,
                deadline=time.monotonic() + tool.spec.timeout,
                idempotency_key=self.key(record.task_id, record.call_id),
                arguments=record.arguments,
                approval_id=record.approval_id,
            )
            found: object = None
            with anyio.move_on_after(tool.spec.timeout) as scope:
                found = await _ask(tool.reconcile, ctx, self.limiter)
            if scope.cancelled_caught:
                _log.warning("reconciling %s %r timed out; it stays unknown", ctx.tool, ctx.call_id)
            if not isinstance(found, ToolResult) or found.status not in (
                CallStatus.SUCCEEDED,
                CallStatus.FAILED,
            ):
                continue
            changes = _recordable(found, ctx)
            if changes is None:
                continue
            try:
                updated = await self.store.transition(
                    record.task_id,
                    record.call_id,
                    expected=CallStatus.UNKNOWN_OUTCOME,
                    target=found.status,
                    changes=changes,
                )
            except StaleState:
                continue
            self.audit(updated, previous=CallStatus.UNKNOWN_OUTCOME, by="reconcile")
            settled.append(updated)
        return settled

    async def settle(
        self,
        task_id: str,
        call_id: str,
        *,
        succeeded: bool,
        by: str,
        note: str,
        result: Any = None,
        effect_ref: str | None = None,
    ) -> CallRecord:
        """Record what a person found out about an UNKNOWN_OUTCOME call (see
        `toolkeeper.ledger.recovery.settle`, which raises as this does).

        Returns:
            The call's record, as stored.
        """
        updated = await settle(
            self.store,
            task_id,
            call_id,
            succeeded=succeeded,
            by=by,
            note=note,
            result=result,
            effect_ref=effect_ref,
        )
        self.audit(updated, previous=CallStatus.UNKNOWN_OUTCOME, by=f"person:{by}", note=note)
        return updated

    def audit(self, record: CallRecord, *, previous: CallStatus, by: str, **extra: Any) -> None:
        """Send the audit event of a state change made outside a call (recovery,
        reconciliation, a person settling it): `by` says who made it."""
        error = record.error or {}
        self.emit(
            AuditEvent(
                at=self.clock(),
                task_id=record.task_id,
                call_id=record.call_id,
                tool=record.tool,
                version=record.version,
                principal_id=record.principal_id,
                tenant=record.tenant,
                status=record.status,
                previous=previous,
                attempt=record.attempt,
                error_code=error.get("code"),
                message=error.get("message"),
                approval_id=record.approval_id,
                extra={"by": by, **extra},
            )
        )


async def _ask(reconcile: Reconciler, ctx: CallContext, limiter: anyio.CapacityLimiter) -> object:
    """One reconciler's answer; None when it fails. A sync one (a status lookup over a
    blocking client) runs in a worker thread, as a sync tool does: on the event loop it would
    stall every other task, and no timeout could cut it short."""
    try:
        if inspect.iscoroutinefunction(reconcile):
            found = reconcile(ctx)
        else:
            found = await anyio.to_thread.run_sync(
                reconcile, ctx, abandon_on_cancel=True, limiter=limiter
            )
        if hasattr(found, "__await__"):
            found = await found
        return found
    except Exception:
        _log.exception("reconciling %s %r failed; it stays unknown", ctx.tool, ctx.call_id)
        return None


def _recordable(found: ToolResult, ctx: CallContext) -> dict[str, Any] | None:
    """What a reconciler found, as the ledger records it: its data and error made JSON as a
    tool's result is (dates, decimals, models...); None, with a warning, when they cannot be
    (the call stays unknown)."""
    try:
        return {
            "result": json_data(found.data),
            "error": json_data(found.error.to_dict()) if found.error else None,
            "effect_ref": found.effect_ref,
        }
    except NOT_JSON as exc:
        _log.warning(
            "reconciling %s %r found what is not JSON data (%s: %s); it stays unknown",
            ctx.tool,
            ctx.call_id,
            type(exc).__name__,
            exc,
        )
        return None
