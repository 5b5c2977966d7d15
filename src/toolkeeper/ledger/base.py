"""The ledger store Protocol: the durable record of every call and every approval.

What it is: the one place that says whether a call ran, is running, or ended, written *before*
a side effect starts and after it ends, and the place approvals live so that they survive
restarts. Stores enforce the call state machine (`IllegalTransition`) and give compare-and-set
transitions so that across processes exactly one claimant runs a call.

What it is not: a cache of tool results for other calls, or a queue. Implementations:
`MemoryStore` (tests, scripts), `SQLiteStore` (the embedded default), `PostgresStore`
(several processes or hosts). One contract suite (`tests/ledger/contract.py`) runs unchanged
against all of them.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from ..core.errors import ToolkeeperError
from ..core.states import CallStatus

if TYPE_CHECKING:
    from .pages import CallQuery

__all__ = [
    "EVERY",
    "ApprovalRecord",
    "ApprovalStatus",
    "BudgetHold",
    "CallRecord",
    "LedgerStore",
    "RunRecord",
    "StaleRun",
    "StaleState",
    "check_limit",
    "current_owner",
    "hold_counts",
    "is_abandoned",
]


class StaleState(ToolkeeperError):
    """A compare-and-set transition found the call in another state than expected.

    Another process moved the call first; re-read it and follow what it did.
    """

    def __init__(self, expected: CallStatus, actual: CallStatus | None) -> None:
        super().__init__(f"expected {expected}, found {actual}")
        self.expected = expected
        self.actual = actual


class StaleRun(ToolkeeperError):
    """A run's state was saved by someone else since it was read (`save_run`'s
    compare-and-set): another process resumed it first. Re-read it and follow what it did."""

    def __init__(self, run_id: str, expected: int, actual: int | None) -> None:
        super().__init__(f"run {run_id}: expected version {expected}, found {actual}")
        self.run_id = run_id
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """An agent run's state, stored so that any process can resume it (`toolkeeper.agent`).

    The store keeps `state` as it is given: the agent owns its meaning."""

    run_id: str
    """The run's id (its calls' `task_id`)."""
    status: str
    """Where the run stands (`running`, `awaiting_approval`, `completed`, ...)."""
    state: str
    """The run's state as JSON text: messages, pending calls, usage."""
    version: int = 0
    """How many times it was saved; the compare-and-set of `save_run` checks it."""
    created_at: float = 0.0
    """When it was first saved (epoch seconds)."""
    updated_at: float = 0.0
    """When it was last saved (epoch seconds)."""


class CallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One call as the ledger knows it. Keyed by (`task_id`, `call_id`)."""

    task_id: str
    """The task the call belongs to."""
    call_id: str
    """The call's id within the task."""
    tool: str
    """Tool name."""
    version: str
    """Tool version."""
    digest: str
    """HMAC-SHA256 under the ledger's digest key (`ledger.keys`) of the canonical JSON of the
    arguments as proposed: what dedupe, the pipeline's first gate, compares before anything is
    validated, so a replay must propose the same arguments (a default spelled out is another
    proposal). `raw:` + the digest of the text when it did not parse. Approvals bind the
    validated arguments with defaults applied."""
    arguments: Mapping[str, Any]
    """The arguments with sensitive fields redacted."""
    principal_id: str
    """Who the call acts for."""
    tenant: str
    """The principal's tenant."""
    status: CallStatus
    """Current state."""
    effect: str
    """The tool's declared effect (`read_only`, `write`, `destructive`) when the call began."""
    idempotent: bool
    """Whether the tool was declared idempotent when the call began."""
    idempotency_key: str
    """Runtime-owned key handed to the tool; stable across retries and restarts."""
    attempt: int = 0
    """Attempts started so far."""
    approval_id: str | None = None
    """The approval this call waits for or used."""
    effect_ref: str | None = None
    """A reference to the side effect, as reported by the tool."""
    result: Any = None
    """The result data (stores may keep large results apart and load them back)."""
    result_ref: str | None = None
    """SHA-256 of the JSON result when the store keeps it apart (it is over the store's size
    threshold); set by durable stores on write, None when the result is kept inline."""
    content: tuple[Mapping[str, Any], ...] | None = None
    """The result as the MCP content blocks the tool answered with (an upstream's images and
    resources), when it has any beside text: what an MCP client gets again on a replay."""
    error: Mapping[str, Any] | None = None
    """The `ToolError.to_dict()` of a refusal or failure."""
    owner: str = ""
    """`host:pid` of the process that last claimed the call."""
    deadline: float | None = None
    """Wall-clock time (epoch seconds) by which the running attempt must end."""
    created_at: float = 0.0
    """When the record was first written (epoch seconds)."""
    updated_at: float = 0.0
    """When it last changed (epoch seconds)."""
    history: tuple[tuple[CallStatus, float], ...] = ()
    """Every persisted state with the time it was entered, oldest first."""


class ApprovalStatus(StrEnum):
    """Where an approval request stands."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    """Taken back by toolkeeper: nothing waits for it any more (a concurrent proposal was
    recorded first, or the tool changed), so no person need decide it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRecord:
    """A request for a person to approve one exact call: tool, version, principal, call, and
    the digest of the validated arguments. An approval grants that digest and nothing else."""

    id: str
    """Approval id, shown to people (`toolkeeper approvals approve ID`)."""
    task_id: str
    """Task of the call."""
    call_id: str
    """The call waiting for it."""
    tool: str
    """Tool name."""
    version: str
    """Tool version the approval is bound to."""
    principal_id: str
    """Who the call acts for."""
    digest: str
    """Keyed digest of the canonical validated arguments; the dispatch recomputes and compares
    it."""
    arguments: Mapping[str, Any]
    """The arguments (sensitive fields redacted) for the person deciding."""
    reason: str
    """Why approval is required."""
    status: ApprovalStatus = ApprovalStatus.PENDING
    """Pending, approved, denied or expired."""
    created_at: float = 0.0
    """When it was requested (epoch seconds)."""
    expires_at: float | None = None
    """After this time (epoch seconds) a pending or approved request no longer counts."""
    decided_by: str | None = None
    """Who approved or denied it."""
    decided_at: float | None = None
    """When it was decided (epoch seconds)."""
    note: str | None = None
    """The decider's note or reason for a denial."""

    def expired(self, now: float) -> bool:
        """True when the request is past its expiry."""
        return self.expires_at is not None and now >= self.expires_at


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetHold:
    """A call's place in its task's budgets, asked for before it runs (`hold_budget`).

    A hold counts, beside the task's counted calls, until its call has a record that counts
    itself, or one written at or after `created_at` (the call ended without running), or
    until `expires_at` (its process died before it wrote one): `hold_counts`."""

    tenant: str
    """Tenant of the task."""
    task_id: str
    """The task whose budgets it counts against."""
    call_id: str
    """The call that holds it (another hold of the same call replaces it)."""
    tool: str
    """The call's tool (per-tool budgets count only its holds)."""
    limits: tuple[tuple[str | None, int], ...]
    """(tool, limit) per budget to check: a tool name for a per-tool budget, None for the
    whole task."""
    counted: tuple[CallStatus, ...]
    """The record states a budget counts."""
    created_at: float
    """When it was asked for (epoch seconds)."""
    expires_at: float
    """When it stops counting if its call never writes a record (epoch seconds)."""


def hold_counts(hold: BudgetHold, record: CallRecord | None, now: float) -> bool:
    """Whether a stored hold still counts at `now`: it is live, and its call has no record
    that counts itself (`hold.counted`) or was written since the hold was taken."""
    if hold.expires_at <= now:
        return False
    return record is None or (
        record.status not in hold.counted and record.updated_at < hold.created_at
    )


@runtime_checkable
class LedgerStore(Protocol):
    """Durable storage of call records and approvals. All methods are safe to call from many
    tasks, and (for shared backends) from many processes at once."""

    async def open(self) -> None:
        """Create or migrate the schema. Idempotent."""
        ...

    async def aclose(self) -> None:
        """Release connections. Idempotent."""
        ...

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        """The record of a call, or None."""
        ...

    async def claim_call(self, record: CallRecord) -> tuple[CallRecord, bool]:
        """Insert `record` unless a record with its key exists.

        Returns the stored record and True when this call inserted it, or the existing record
        and False. Exactly one of several concurrent claimants gets True.
        """
        ...

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
        """Move a call from `expected` to `target`, applying `changes` (field name → value of
        `CallRecord`, except the key, `status` and `history`) atomically. With
        `expected_attempt`, the call must also still be at that attempt: what tells one
        RUNNING -> RUNNING takeover from another.

        Raises:
            IllegalTransition: the state machine does not allow `expected -> target`.
            StaleState: the call is not (or no longer) in `expected` (at `expected_attempt`).
            KeyError: no such call.
        """
        ...

    async def list_calls(
        self,
        *,
        statuses: Sequence[CallStatus] | None = None,
        task_id: str | None = None,
        limit: int = 1000,
    ) -> list[CallRecord]:
        """Calls filtered by state and task, oldest first: at most `limit` (0 or more; use
        `EVERY` for all of them). What the runtime scans (recovery, reconciliation); to read
        the ledger, newest first and by time, use `page_calls`.

        Raises:
            ValueError: `limit` is negative.
        """
        ...

    async def page_calls(self, query: CallQuery) -> list[CallRecord]:
        """One page of the calls `query` selects, newest first (by creation time, then task
        and call id): at most `query.limit`. The next page is `query` with `after` the cursor
        of this page's last call (`CallCursor.of`)."""
        ...

    async def count_calls(
        self,
        task_id: str,
        *,
        tool: str | None = None,
        statuses: Sequence[CallStatus] | None = None,
        tenant: str | None = None,
    ) -> int:
        """How many calls of a task (and tool, and tenant) are in the given states."""
        ...

    async def hold_budget(self, hold: BudgetHold) -> int | None:
        """Take `hold` if every budget of `hold.limits` has room, atomically across every
        process sharing the store: for each (tool, limit), the task's calls in a counted
        state plus the holds that still count (`hold_counts`), other than this call's, of
        that tool (or of any, for None) must be fewer than `limit`.

        Returns:
            None when the hold was taken; else the index in `hold.limits` of the first full
            budget (nothing is stored then).
        """
        ...

    async def create_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """Store a new approval request."""
        ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """One approval request, or None."""
        ...

    async def decide_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        by: str | None,
        note: str | None,
        at: float,
    ) -> ApprovalRecord:
        """Approve, deny, expire or withdraw a *pending* request.

        Raises:
            KeyError: no such approval.
            ValueError: the request is no longer pending, or `status` is `PENDING`.
        """
        ...

    async def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 1000
    ) -> list[ApprovalRecord]:
        """Approval requests in `status` (every status when None), oldest first: at most
        `limit` (0 or more; `EVERY` for all of them).

        Raises:
            ValueError: `limit` is negative.
        """
        ...

    async def save_run(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        """Store a run's state if the stored one is at `expected_version` (0: no run of that
        id is stored yet), atomically across processes sharing the store.

        Returns:
            The stored record: version `expected_version + 1`, `updated_at` now,
            `created_at` kept from the first save.

        Raises:
            StaleRun: the stored version is another (another process saved it first).
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """A run's stored state, or None."""
        ...


_OWNER: str | None = None


def current_owner() -> str:
    """`host:pid` of this process, written on every claim."""
    global _OWNER
    if _OWNER is None:  # once per process: a forked child forgets its parent's (below)
        _OWNER = f"{socket.gethostname()}:{os.getpid()}"
    return _OWNER


def _forget_owner() -> None:
    global _OWNER
    _OWNER = None


os.register_at_fork(after_in_child=_forget_owner)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_start(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), where /proc tells (Linux), else None; and
    +inf for a zombie (dead, not yet reaped: never the owner of a running call)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            fields = file.read().rpartition(")")[2].split()
        if fields[0] in ("Z", "X"):
            return math.inf
        with open("/proc/stat", encoding="ascii") as file:
            boot = next(float(line.split()[1]) for line in file if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


EVERY = 2**62
"""A `list_calls` limit no ledger reaches: every matching call."""


def check_limit(limit: int) -> int:
    """`limit` when it is a count (0 or more).

    Raises:
        ValueError: it is negative.
    """
    if limit < 0:
        raise ValueError(f"limit must be 0 or more, not {limit}")
    return limit


def is_abandoned(record: CallRecord, *, now: float, grace: float = 5.0) -> bool:
    """Whether a RUNNING record has no live process behind it any more.

    A record claimed by a process on this host is abandoned as soon as that process is gone;
    one claimed elsewhere only once its deadline (plus `grace`) has passed.
    """
    if record.status is not CallStatus.RUNNING:
        return False
    host, _, pid = record.owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        if int(pid) == os.getpid():
            return False
        if not _pid_alive(int(pid)):
            return True
        started = _process_start(int(pid))
        if started is not None:
            # Alive: the owner, however late (a loop blocked, a process paused), unless the
            # pid was taken again by a process that started after it claimed the call.
            claimed = max(
                (at for status, at in record.history if status is CallStatus.RUNNING),
                default=record.updated_at,
            )
            return started > claimed + 1.0
    return record.deadline is not None and now > record.deadline + grace
