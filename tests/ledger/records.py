"""Small builders of ledger values for the ledger tests."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import ApprovalRecord, CallRecord, current_owner
from toolkeeper.ledger.base import BudgetHold
from toolkeeper.policy.budgets import COUNTED_STATUSES


def call(
    call_id: str = "call-1",
    *,
    task_id: str = "task-1",
    status: CallStatus = CallStatus.RUNNING,
    tool: str = "payments.transfer",
    idempotent: bool = False,
    effect: str = "write",
    owner: str | None = None,
    principal_id: str = "alice",
    **fields: Any,
) -> CallRecord:
    """A call record as the executor would first write it."""
    return CallRecord(
        task_id=task_id,
        call_id=call_id,
        tool=tool,
        version="1",
        digest="ab" * 32,
        arguments={"to": "acct-7", "amount": 12.5, "memo": "café ☕", "token": "[REDACTED]"},
        principal_id=principal_id,
        tenant="acme",
        status=status,
        effect=effect,
        idempotent=idempotent,
        idempotency_key=f"tk-{task_id}-{call_id}",
        owner=current_owner() if owner is None else owner,
        **fields,
    )


def approval(approval_id: str = "apr-1", *, created_at: float = 1000.0) -> ApprovalRecord:
    """A pending approval request."""
    return ApprovalRecord(
        id=approval_id,
        task_id="task-1",
        call_id="call-1",
        tool="reports.publish",
        version="2",
        principal_id="alice",
        digest="cd" * 32,
        arguments={"title": "Q3"},
        reason="destructive tools need a person's approval",
        created_at=created_at,
        expires_at=created_at + 3600,
    )


def dead_pid() -> int:
    """The pid of a child process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def hold(
    call_id: str,
    *,
    task_id: str = "t",
    tool: str = "payments.transfer",
    limits: tuple[tuple[str | None, int], ...],
    at: float | None = None,
    lasts: float = 300.0,
) -> BudgetHold:
    """A budget hold of a call of tenant acme (as `call` makes them), taken at `at` (now)."""
    now = time.time() if at is None else at
    return BudgetHold(
        tenant="acme",
        task_id=task_id,
        call_id=call_id,
        tool=tool,
        limits=limits,
        counted=COUNTED_STATUSES,
        created_at=now,
        expires_at=now + lasts,
    )
