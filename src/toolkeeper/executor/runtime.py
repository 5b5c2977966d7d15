"""What the pipeline's steps share: the catalog, the ledger, policy and the audit sink."""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import sniffio

from ..catalog.registry import Catalog, CatalogEvent, Tool
from ..core.retry import RetryPolicy
from ..core.values import Principal
from ..ledger.base import LedgerStore
from ..observe.audit import AuditEvent, AuditSink
from ..observe.redact import sensitive_pointers
from ..observe.telemetry import Telemetry
from ..policy.approvals import Approvals
from ..policy.budgets import Budgets, RateLimiter
from ..schema.validate import compile_validator
from .deadlines import Deadlines, LoopDeadlines
from .state import Prepared

__all__ = [
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "Runtime",
    "event_loop_clock",
    "event_loop_deadlines",
    "idempotency_key",
]

DEFAULT_MAX_ARGUMENT_BYTES = 1 << 20
"""Arguments larger than this (1 MiB) are refused as PAYLOAD_TOO_LARGE."""

_log = logging.getLogger("toolkeeper")


def idempotency_key(task_id: str, call_id: str) -> str:
    """The runtime-owned key of a call: derived from its identity, so it is the same on every
    attempt, after every restart, and in every process."""
    raw = f"{task_id}\x00{call_id}".encode()
    return "tk_" + hashlib.sha256(raw).hexdigest()[:32]


def event_loop_clock() -> Callable[[], float]:
    """The running event loop's clock: asyncio's is `time.monotonic`; another backend's is
    asked through anyio (which looks the backend up on every reading)."""
    if sniffio.current_async_library() == "asyncio":
        return time.monotonic
    return anyio.current_time


def event_loop_deadlines() -> Deadlines:
    """What cancels attempts at their deadline on the running event loop: on asyncio, one
    timer per loop (`LoopDeadlines`); on another backend, each attempt's scope's own."""
    if sniffio.current_async_library() == "asyncio":
        return LoopDeadlines()
    return Deadlines()


def _has_defaults(node: Any, depth: int = 0) -> bool:
    if depth > 32:
        return False
    if isinstance(node, dict):
        if "default" in node:
            return True
        return any(_has_defaults(v, depth + 1) for v in node.values())
    if isinstance(node, list):
        return any(_has_defaults(v, depth + 1) for v in node)
    return False


@dataclass(kw_only=True, slots=True)
class Runtime:
    """The dependencies of every pipeline step (built once by `Keeper`)."""

    catalog: Catalog
    """Tools by name."""
    store: Callable[[], LedgerStore]
    """The open ledger store."""
    approvals: Approvals
    """Approval requests and checks."""
    audit: AuditSink
    """Where audit events go."""
    principal: Principal | None
    """The principal of calls that name none; None: such a call is refused."""
    retry: RetryPolicy
    """Retry policy of tools that declare none."""
    rules: Sequence[Any] = ()
    """Rules checked for every call after the tool's own."""
    budgets: Budgets | None = None
    """Call budgets and rate limits."""
    limiter: RateLimiter | None = None
    """Rate limiter for `budgets.calls_per_minute`."""
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    """Argument payloads larger than this are refused."""
    telemetry: Telemetry | None = None
    """Observes every call (traces, metrics); None: nothing is observed, at no cost."""
    digest_key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    """The key of argument digests (`ledger.keys`): `Keeper.open` sets the ledger's. Never
    shown by `repr`: whoever holds it can check guesses of sensitive arguments."""
    clock: Callable[[], float] = time.time
    """Wall clock (epoch seconds)."""
    sleep: Callable[[float], Any] | None = None
    """Waits between retries (anyio.sleep unless a test clock replaces it)."""
    cancel_scope: Callable[..., anyio.CancelScope] = anyio.CancelScope
    """Makes cancel scopes (`deadline=`, `shield=`): `Keeper.open` binds it to the running
    backend's class, which saves looking the backend up for every attempt."""
    loop_clock: Callable[[], float] = anyio.current_time
    """The event loop's clock, which cancel scopes' deadlines are on (`Keeper.open` binds
    the running backend's: `event_loop_clock`)."""
    deadlines: Deadlines = field(default_factory=Deadlines)
    """Cancels each attempt's scope at its deadline (`Keeper.open` binds the running
    backend's: `event_loop_deadlines`)."""
    draining: bool = False
    """Set when the process is stopping (`Keeper.drain`): calls in flight end after their
    current attempt, without retries."""
    waits: set[anyio.CancelScope] = field(default_factory=set)
    """The waits of calls between two attempts (`Keeper.drain` cancels them)."""
    unended: dict[tuple[str, str], bool] = field(default_factory=dict)
    """Calls this process wrote RUNNING but could not end, the ledger having failed, by (task,
    call): whether their effect may have happened. Nothing runs them any more, though their
    owner lives: proposed again, they are taken for abandoned, as after a restart."""
    _prepared: dict[int, tuple[Tool, Prepared]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.catalog.subscribe(self._forget)

    def _forget(self, event: CatalogEvent) -> None:
        for tool in (event.tool, event.previous):
            if tool is not None:
                self._prepared.pop(id(tool), None)

    def prepared(self, tool: Tool) -> Prepared:
        """The cached validator and redaction facts of one tool version."""
        hit = self._prepared.get(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        schema = tool.spec.input_schema
        prepared = Prepared(
            validator=compile_validator(schema),
            has_defaults=_has_defaults(dict(schema)),
            sensitive=sensitive_pointers(schema, tool.sensitive),
            check=getattr(tool.connector, "argument_check", None),
        )
        self._prepared[id(tool)] = (tool, prepared)
        return prepared

    def emit(self, event: AuditEvent) -> None:
        """Send an audit event; a failing sink never fails a call."""
        try:
            self.audit.emit(event)
        except Exception:  # auditing must not break the call it records
            _log.exception("audit sink failed")
