"""The working state of one call while it passes the pipeline (internal, mutable)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..catalog.registry import Tool
from ..core.errors import ToolError
from ..core.states import CallStatus
from ..core.values import Principal, ToolCall
from ..ledger.base import ApprovalRecord, CallRecord
from ..observe.redact import hidden_values
from ..observe.telemetry import CallTrace

__all__ = ["Attempts", "CallState", "Outcome", "Prepared"]


@dataclass(slots=True)
class Prepared:
    """What the pipeline derives once per tool (version) and caches."""

    validator: Any
    """The compiled input validator."""
    has_defaults: bool
    """Whether the input schema declares defaults to fill in."""
    sensitive: frozenset[str]
    """JSON pointers of arguments to redact."""
    check: Callable[[Mapping[str, Any]], list[Any]] | None = None
    """The connector's own check of schema-valid arguments (`argument_check`), if any."""


@dataclass(slots=True)
class CallState:
    """One call in flight. Gates read and fill it in pipeline order."""

    call: ToolCall
    """The call as proposed."""
    principal: Principal
    """Who it acts for (the call's, or the executor's default)."""
    reentries: int = 0
    """How often the pipeline restarted after losing a race to another process."""
    arguments: dict[str, Any] | None = None
    """Parsed arguments, when they parsed to an object."""
    parse_error: str | None = None
    """Why the arguments did not parse, when they did not."""
    request_digest: str = ""
    """Digest of the arguments as proposed; what dedupe compares."""
    tool: Tool | None = None
    """The tool, once looked up."""
    prepared: Prepared | None = None
    """The tool's cached validator and redaction pointers."""
    validated: dict[str, Any] | None = None
    """Validated arguments with defaults applied."""
    redacted: dict[str, Any] = field(default_factory=dict)
    """The arguments as they may be stored."""
    approval_reason: str | None = None
    """Why the call needs approval, when it does."""
    skip_approval: bool = False
    """A rule waived the default approval of a destructive tool."""
    record: CallRecord | None = None
    """The ledger record of this call, when one exists."""
    approval: ApprovalRecord | None = None
    """The granted approval the call runs under."""
    takeover: bool = False
    """The call was found RUNNING and abandoned, and is safe to run again."""
    idempotency_key: str = ""
    """The call's idempotency key, once computed."""
    trace: CallTrace | None = None
    """The call's observer (`Runtime.telemetry`), when there is one."""

    def anew(self) -> CallState:
        """The state of the same proposal for another pass through every gate."""
        return CallState(self.call, self.principal, self.reentries + 1, trace=self.trace)

    def hidden(self) -> tuple[str, ...]:
        """The argument values the call's record redacts: what words about the call (a
        tool's failure message and details, a rule's or a tool's reason) must not show the
        model, the ledger, an approver or the audit log either. Only such words ask, so a
        call that has none never pays for it."""
        if self.prepared is None or not self.prepared.sensitive:
            return ()
        return hidden_values(self.validated, self.redacted)


@dataclass(slots=True)
class Outcome:
    """How one attempt ended, or the call: what the journal records."""

    status: CallStatus
    data: Any = None
    effect_ref: str | None = None
    error: ToolError | None = None
    nothing_sent: bool = False
    """The failure happened before the request left: a retry cannot repeat an effect."""
    unknown: bool = False
    """The request may have taken effect."""
    approval_reason: str | None = None
    content: tuple[Mapping[str, Any], ...] | None = None
    """MCP content blocks of the result (`ToolOutput.content`), recorded with the data."""


@dataclass(slots=True)
class Attempts:
    """Where a call that runs stands: its attempts, and what its record holds of them."""

    number: int
    """The attempt under way, or the last one made."""
    started_at: float
    """When the call started to run (wall clock)."""
    recorded: int | None = None
    """The attempt the RUNNING record this process wrote holds; None when it wrote none."""
    sent: bool = False
    """Whether an ended attempt may have sent its request (an effect may have happened)."""
    attempting: bool = False
    """An attempt is under way."""
    last: Outcome | None = None
    """How the last ended attempt ended."""

    @property
    def may_have_run(self) -> bool:
        """Whether the call's effect may have happened."""
        return self.sent or self.attempting
