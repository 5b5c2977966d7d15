"""The values every layer shares: tools, principals, calls, results and the context of a call.

Frozen, keyword-only values with no behaviour beyond small derived properties. The values built
once per call (`ToolCall`, `ToolResult`, `CallContext`) are `msgspec.Struct`s, built in C: a
frozen dataclass sets each field through `object.__setattr__`, which made building them most of
the cost of a quick call; `msgspec.structs.replace` copies one with changes. The others are
frozen dataclasses. This module does no I/O and imports nothing beyond the standard library and
msgspec.
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from .errors import ToolError
from .states import CallStatus
from .tracing import RequestTracer

__all__ = [
    "ANONYMOUS",
    "DEFAULT_INPUT_SCHEMA",
    "MCP_CONTENT",
    "CallContext",
    "Effect",
    "Fence",
    "Principal",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "grant_pattern",
]

MCP_CONTENT = "mcp_content"
"""`ToolResult.metadata` key of a result's MCP content blocks (an upstream's images and
resources), which the MCP format sends as they are; recorded with the call
(`CallRecord.content`), so a replay sends them again."""

DEFAULT_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
"""The input schema of a tool that takes no arguments (a closed, empty object)."""


class Effect(StrEnum):
    """What running a tool may change outside."""

    READ_ONLY = "read_only"
    """Changes nothing; safe to run again."""
    WRITE = "write"
    """Changes something that can be changed back."""
    DESTRUCTIVE = "destructive"
    """Changes something that cannot be taken back (publish, pay, delete)."""

    @classmethod
    def _missing_(cls, value: object) -> Effect:
        # `effect="readonly"` said only "'readonly' is not a valid Effect".
        known = [e.value for e in cls]
        close = difflib.get_close_matches(str(value), known, n=1) if isinstance(value, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"{value!r} is not an effect: use one of {', '.join(known)}{hint}")


class Fence(StrEnum):
    """How a tool's output is shown to a model: as it is, or fenced as data from its source.

    A fenced result is marked, in every dialect, as output of a named tool from a named
    source that is data and not instructions (`dialects.fence`); its structured content is
    kept as it is."""

    NONE = "none"
    """Shown as it is: output the operator trusts (their own functions)."""
    MARK = "mark"
    """Fenced as data from its source."""
    SCAN = "scan"
    """Fenced, and scanned for instruction-like text, which the fence names
    (`details.suspicious`)."""


def name_tuple(value: Any) -> tuple[Any, ...]:
    """Names in order, from a tuple, a list or any iterable, or one name as text (one name,
    not its characters)."""
    return (value,) if isinstance(value, str) else tuple(value)


def is_count(value: object, least: int) -> bool:
    """Whether `value` is a whole number (an int, not a bool) of at least `least`."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def is_positive(value: object) -> bool:
    """Whether `value` is a finite number (an int or float, not a bool) above 0: what a
    timeout or a rate must be (NaN and infinity would mean none at all)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


def grant_pattern(grant: str) -> str:
    """`grant`, when it is a permission pattern that grants can match.

    A grant is `*` (everything), a namespace ending in `:*` (`orders:*`), or one permission
    exactly (case counts: `Orders:read` is not `orders:read`). Rules take globs, grants do
    not: any other wildcard (`airline:get_*`, `*:read`, `?`, `[...]`) would match nothing, so
    it is refused rather than accepted and ignored; so is an empty grant, an empty namespace
    (`:*`), and one with a space (or any whitespace) at either end (`"orders:read "`).

    Raises:
        ValueError: `grant` holds a wildcard other than those two forms, or names nothing.
    """
    body = grant[:-2] if grant.endswith(":*") else "" if grant == "*" else grant
    if any(char in body for char in "*?["):
        raise ValueError(
            f"grant {grant!r} holds a wildcard a grant cannot match: grants are '*', "
            "'namespace:*' or one permission exactly (only rules take globs)"
        )
    if grant in ("", ":*") or grant.strip() != grant:
        raise ValueError(f"grant {grant!r} names no permission (empty, or space at an end)")
    return grant


def _frozen(value: Any) -> frozenset[str]:
    """A set of names, from a set, a list, or one name as text."""
    return frozenset(name_tuple(value))


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """Who a call acts for."""

    id: str
    """A stable identity: a user, a service account, an agent."""
    tenant: str = "default"
    """The tenant whose tools and data the principal may reach."""
    environment: str = "default"
    """The environment the call runs in (`dev`, `prod`, ...)."""
    grants: frozenset[str] = frozenset()
    """Permission patterns held, such as `orders:*` or `files:write`; `*` grants everything."""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """Free-form facts that rules may read (roles, limits, a display name)."""

    def __post_init__(self) -> None:
        # Ids key ledger records and approvals: text every store keeps as it is (an int id
        # read back from SQL as "5" was another principal, a NUL failed on PostgreSQL).
        for name in ("id", "tenant", "environment"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or "\x00" in value:
                raise ValueError(f"Principal.{name} must be non-empty text without NUL: {value!r}")
        # `grants="orders:*"` is one grant: as a string, `"*" in grants` held for every
        # pattern with a star, which granted everything.
        if not isinstance(self.grants, frozenset):
            object.__setattr__(self, "grants", _frozen(self.grants))
        # A grant that is not text (None from a NULL column, bytes) cannot be matched: it
        # failed every call of the principal as an INTERNAL_ERROR.
        for grant in self.grants:
            if not isinstance(grant, str):
                raise ValueError(f"Principal.grants must be permission patterns (text): {grant!r}")
            try:
                grant_pattern(grant)
            except ValueError as exc:
                raise ValueError(f"Principal.grants: {exc}") from None


ANONYMOUS = Principal(id="anonymous")
"""A principal holding no grant: it may use only read-only tools that require no permission
(in the default tenant and environment)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A tool's contract: what the model may see, and the trusted facts the runtime relies on.

    Model-visible: `name`, `description`, `input_schema`, `examples`, and `output_schema`
    in the formats that carry it (OpenAI Responses, Gemini, MCP for an object result).
    `title` (a display name) and `effect` / `idempotent` go to MCP clients as hints; the rest is
    runtime-only and never exported. A dialect's loss report lists only model-visible parts the
    format cannot carry.
    """

    name: str
    """Stable, namespaced, verb-object: `orders.get_detail`."""
    description: str = ""
    """When to use it, when not, and its side effects."""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_INPUT_SCHEMA))
    """JSON Schema (2020-12) of the arguments object."""
    output_schema: Mapping[str, Any] | None = None
    """JSON Schema (2020-12) of the result data, when known."""
    title: str | None = None
    """A short human-readable name."""
    effect: Effect = Effect.WRITE
    """What a run may change. Undeclared tools are assumed to write."""
    idempotent: bool = False
    """Whether running the same call twice has the effect of running it once."""
    permissions: tuple[str, ...] = ()
    """Permissions a principal must hold to call it, e.g. `orders:read`."""
    tags: tuple[str, ...] = ()
    """Free-form labels used by search and filters."""
    aliases: tuple[str, ...] = ()
    """Other names users and models know it by (searchable, not callable)."""
    examples: tuple[Mapping[str, Any], ...] = ()
    """Example argument objects."""
    version: str = "1"
    """Changes whenever the contract changes; approvals and validators are bound to it."""
    timeout: float = 30.0
    """Seconds one attempt may run before it is stopped."""
    environments: frozenset[str] | None = None
    """Environments the tool exists in; None means every environment."""
    tenants: frozenset[str] | None = None
    """Tenants the tool exists for; None means every tenant."""
    source: str = "local"
    """Which connector or upstream server provides it."""
    fence: Fence = Fence.NONE
    """How its output is shown to a model: fenced as data from `source` (an upstream's, by
    default), or as it is (a local function's)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Runtime-only extras from the tool's source (e.g. MCP annotations as received)."""

    def __post_init__(self) -> None:
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(f"ToolSpec.timeout must be seconds, not {type(timeout).__name__}")
        if not is_positive(timeout):
            raise ValueError(
                f"ToolSpec.timeout must be a positive, finite number of seconds, not {timeout!r}"
            )
        # `effect="destructive"` as plain text must mean what it says: every gate compares
        # with the `Effect` members (as text it skipped the default approval).
        if not isinstance(self.effect, Effect):
            object.__setattr__(self, "effect", Effect(self.effect))
        if not isinstance(self.fence, Fence):
            object.__setattr__(self, "fence", Fence(self.fence))
        # One name given as text is one item, not its characters (`tenants="acme"` let
        # tenant "a" in and kept "acme" out).
        for name in ("permissions", "tags", "aliases"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, name_tuple(value))
        for name in ("environments", "tenants"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, frozenset):
                object.__setattr__(self, name, _frozen(value))

    @property
    def has_side_effects(self) -> bool:
        """True unless the tool is read-only."""
        return self.effect is not Effect.READ_ONLY

    @property
    def retry_safe(self) -> bool:
        """A failed attempt may be retried only for read-only or idempotent tools."""
        return self.effect is Effect.READ_ONLY or self.idempotent


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One invocation a model proposed."""

    call_id: str
    """The id the model (or the dialect, when the vendor gives none) assigned to the call."""
    name: str
    """The tool the model asked for."""
    arguments: Mapping[str, Any] | str = msgspec.field(default_factory=dict)
    """Parsed arguments, or the raw JSON text exactly as the model produced it."""
    task_id: str = "default"
    """The task (conversation, run, job) the call belongs to; dedupe is per task."""
    principal: Principal | None = None
    """Who the call acts for; when None, the keeper's default principal, and a keeper given
    none refuses the call (`Keeper`'s `principal`)."""
    metadata: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """Where the call came from (dialect, raw id, ...); never used for decisions."""


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """One observation: what came back from a call, or why nothing did."""

    call_id: str
    """The call this result answers."""
    tool: str
    """The tool name as called."""
    status: CallStatus
    """Where the call ended (or waits, for AWAITING_APPROVAL)."""
    data: Any = None
    """The tool's output when it succeeded."""
    error: ToolError | None = None
    """Why there is no data; None on success."""
    version: str | None = None
    """The tool version that ran or refused."""
    source: str | None = None
    """The connector or upstream that ran it."""
    attempt: int = 0
    """How many attempts ran (0 when nothing ran)."""
    started_at: float | None = None
    """Wall-clock time (epoch seconds) the first attempt started."""
    finished_at: float | None = None
    """Wall-clock time (epoch seconds) the call ended."""
    effect_ref: str | None = None
    """A reference to the side effect, as reported by the tool (an order id, a commit)."""
    approval_id: str | None = None
    """The approval that this call needs or used."""
    replayed: bool = False
    """True when the result came from the ledger instead of a new run."""
    fence: Fence = Fence.NONE
    """How a dialect shows it to a model: the tool's `ToolSpec.fence`, set by the executor
    on every result of a fenced tool, replays included."""
    metadata: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """Extra facts about the result (coerced arguments, a large-result reference, ...)."""

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.status is CallStatus.SUCCEEDED

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, when the call ran."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class CallContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a running tool may know about its call. Injected into a parameter of this type."""

    call_id: str
    """The call being run."""
    task_id: str
    """The task it belongs to."""
    tool: str
    """The tool's name."""
    version: str
    """The tool's version."""
    principal: Principal
    """Who the call acts for."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, ..."""
    deadline: float
    """`time.monotonic()` value after which the attempt is cancelled."""
    idempotency_key: str
    """Runtime-owned key, stable across retries and restarts of this call: pass it on to the
    service that performs the effect so that it can deduplicate too."""
    arguments: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """The validated arguments (defaults applied)."""
    approval_id: str | None = None
    """The approval this call runs under, when a person approved it: a tool that raises
    `ApprovalRequired` should not ask again when this is set."""
    trace: Mapping[str, str] | None = None
    """The attempt's trace context (W3C `traceparent`, `tracestate`) when telemetry is on:
    a connector that calls a service passes these headers on."""
    requests: RequestTracer | None = None
    """When telemetry is on: what a connector that calls a service tells of each request
    (a span each, whose trace context the request carries instead of `trace`)."""

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())
