"""The connector Protocol: how the executor asks a tool's source to run one attempt.

What it is: the edge between the trusted pipeline and whatever performs the work (a Python
function, an upstream MCP server, an HTTP operation, a program). A connector runs exactly one
attempt with already validated arguments and passes `ctx.idempotency_key` on to whatever
performs the effect. What it is not: a place for policy, retries, timeouts or bookkeeping;
the executor does those, the same way for every connector.

A connector returns the result data, or a `ToolOutput` to also report an effect reference.
The executor makes that data JSON, the same way for every connector, before it is recorded or
shown (`to_jsonable`: dates become ISO text, sets and tuples lists, bytes text or base64, keys
strings); data that cannot be made JSON is recorded as a note that the tool ran. A connector
raises a `ToolSignal` (`ToolFailed`, `RetryLater`, `ApprovalRequired`) to report a failure
the model may see; `UpstreamUnavailable` when the source cannot be reached (nothing ran);
`UnrecordableResult` when the tool ran but what it answered cannot be recorded (not a result
of its protocol); and any other exception for an internal failure, which the model never sees
in detail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .signals import ToolSignal
from .values import CallContext, ToolSpec

__all__ = ["Connector", "ToolOutput", "UnrecordableResult", "UpstreamUnavailable"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutput:
    """What a tool returns when it has more to say than its data."""

    data: Any = None
    """The result data shown to the model, made JSON by the executor."""
    effect_ref: str | None = None
    """A reference to the side effect (an order id, a commit hash), kept in the ledger."""
    content: tuple[Mapping[str, Any], ...] | None = None
    """The result as MCP content blocks (images, resources), for an MCP client to get as they
    are, on the first run and on a replay (the ledger keeps them beside the data); every other
    format shows the data."""


class UpstreamUnavailable(ToolSignal):
    """The tool's source could not be reached before anything was sent: nothing ran."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnrecordableResult(Exception):
    """The attempt finished and the tool ran, but what it returned cannot be recorded: it is
    not JSON data (nested too deeply, say), or an upstream's answer that is not a result of its
    protocol. The call is recorded as succeeded, with a note in place of its data.

    Args:
        reason: What is wrong, for the log.
        what: What the note tells the model about the result ("is not JSON data ...").
    """

    def __init__(self, reason: str, *, what: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.what = what


@runtime_checkable
class Connector(Protocol):
    """Runs one attempt of a tool call."""

    async def invoke(self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        """Run the tool once with validated `arguments`; return data or a `ToolOutput`."""
        ...
