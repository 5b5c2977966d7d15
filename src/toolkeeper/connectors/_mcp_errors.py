"""The errors of one upstream `tools/call`, mapped to toolkeeper's in one place.

A call fails on the SDK's session (`MCPError`, pydantic's `ValidationError` for an answer that
is not a `CallToolResult`, a raw `TimeoutError` from a transport's bounded send) or on the
connector's stdio lane (`LaneClosed`, `PeerError`, `AnswerTooLarge`, the `TimeoutError` of the
call's deadline). The SDK turns its transports' failures into `MCPError`s before they reach a
call: a closed or broken stream is CONNECTION_CLOSED, and so is an HTTP request that could not
connect (the upstream's HTTP client notes those, so the call can tell it was never sent).

What each becomes turns on whether the request reached the server (`Failure`, then `_RAISES`):
nothing sent is `UpstreamUnavailable` (nothing ran); sent and the connection lost is
`OutcomeUnknown` (it may have run); no answer in time is `TimeoutError`; the server's own
error is `ToolFailed`; an answer that cannot be read is `UnrecordableResult` (it ran). The
SDK's own codes are ones a server may send too: CONNECTION_CLOSED is read as a lost
connection, which never claims that a write failed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..core.signals import OutcomeUnknown, ToolFailed
from ._lines import LINE_LIMIT
from ._mcp_pipe import AnswerTooLarge, LaneClosed, PeerError
from .base import UnrecordableResult, UpstreamUnavailable

__all__ = ["Failure", "malformed_result", "map_mcp_errors", "no_answer"]


class Failure(enum.Enum):
    """What the error of a call says happened to it."""

    NOT_SENT = enum.auto()
    """The connection was gone before the request was written."""
    NOT_CONNECTED = enum.auto()
    """The request's HTTP connection could not be made."""
    SESSION_FORGOTTEN = enum.auto()
    """The server no longer knows the session (it restarted) and ran nothing."""
    LOST_MID_CALL = enum.auto()
    """The connection ended while the request was out."""
    NO_ANSWER = enum.auto()
    """No answer came before the call's deadline."""
    SERVER_ERROR = enum.auto()
    """The server answered with an error."""
    MALFORMED_ANSWER = enum.auto()
    """The server answered with something that is not a `tools/call` result."""
    ANSWER_TOO_LARGE = enum.auto()
    """The server answered in a message longer than a message may be."""


_RAISES: Mapping[Failure, Callable[[str, Any], Exception]] = {
    Failure.NOT_SENT: lambda up, _: UpstreamUnavailable(f"upstream {up!r} went away"),
    Failure.NOT_CONNECTED: lambda up, _: UpstreamUnavailable(
        f"upstream {up!r} could not be reached"
    ),
    Failure.SESSION_FORGOTTEN: lambda up, _: UpstreamUnavailable(
        f"upstream {up!r} restarted and forgot the session; reconnecting"
    ),
    Failure.LOST_MID_CALL: lambda up, _: OutcomeUnknown(f"upstream {up!r} closed mid-call"),
    Failure.NO_ANSWER: lambda up, _: TimeoutError(f"upstream {up!r} did not answer"),
    Failure.SERVER_ERROR: lambda _, exc: ToolFailed(f"upstream error {exc.code}: {exc.message}"),
    Failure.MALFORMED_ANSWER: lambda _, exc: malformed_result(exc),
    Failure.ANSWER_TOO_LARGE: lambda up, exc: UnrecordableResult(
        f"upstream {up!r}: {exc}",
        what=f"is longer than the {LINE_LIMIT // 2**20} MiB a message may be",
    ),
}
"""The toolkeeper error each failure is raised as (given the upstream's name and the error)."""


@contextmanager
def map_mcp_errors(
    upstream: str,
    *,
    lost: Callable[[], None],
    unsent: Callable[[], bool],
    forgotten: Callable[[], bool],
) -> Iterator[None]:
    """Raise the errors of one `tools/call` to upstream `upstream` as toolkeeper's, `from`
    the original; any other exception passes unchanged.

    Args:
        upstream: The upstream's name, for the messages.
        lost: Called when the connection ended under the call (to reconnect at once).
        unsent: Whether the call's HTTP request never connected (asked once, on a closed
            connection).
        forgotten: Whether the server answered that it forgot the session (asked once, on
            an error of the server's; true also ends the connection, to open a new session).

    Raises:
        UpstreamUnavailable: Nothing was sent.
        OutcomeUnknown: The connection ended while the request was out.
        TimeoutError: No answer before the call's deadline.
        ToolFailed: The server answered with an error.
        UnrecordableResult: The server answered with something that cannot be recorded.
    """
    try:
        yield
    except Exception as exc:
        failure = _failure(exc, lost=lost, unsent=unsent, forgotten=forgotten)
        if failure is None:
            raise
        raise _RAISES[failure](upstream, exc) from exc


def _failure(
    exc: Exception,
    *,
    lost: Callable[[], None],
    unsent: Callable[[], bool],
    forgotten: Callable[[], bool],
) -> Failure | None:
    """What `exc` says happened to the call; None when it is none of the call's errors."""
    if isinstance(exc, ValidationError):  # the session's: not a CallToolResult
        return Failure.MALFORMED_ANSWER
    if isinstance(exc, AnswerTooLarge):
        return Failure.ANSWER_TOO_LARGE
    if isinstance(exc, LaneClosed):
        lost()
        return Failure.LOST_MID_CALL if exc.sent else Failure.NOT_SENT
    if isinstance(exc, TimeoutError):
        return Failure.NO_ANSWER
    if isinstance(exc, PeerError):  # the lane's: the server itself answered with an error
        return Failure.SERVER_ERROR
    if isinstance(exc, MCPError):
        if exc.code == mcp_types.CONNECTION_CLOSED:
            lost()
            return Failure.NOT_CONNECTED if unsent() else Failure.LOST_MID_CALL
        if exc.code == mcp_types.REQUEST_TIMEOUT:
            return Failure.NO_ANSWER
        # HTTP 404 to a request in a session: the server no longer knows it and ran
        # nothing. The spec's answer: a new session.
        return Failure.SESSION_FORGOTTEN if forgotten() else Failure.SERVER_ERROR
    return None


def no_answer(exc: MCPError) -> str | None:
    """What the SDK's own error says came instead of an answer (`connection_closed`,
    `timeout`), as `_failure` reads it; None for the server's own error."""
    if isinstance(exc, PeerError):
        return None
    return _NO_ANSWER.get(exc.code)


_NO_ANSWER = {
    mcp_types.CONNECTION_CLOSED: "connection_closed",
    mcp_types.REQUEST_TIMEOUT: "timeout",
}


def malformed_result(exc: ValidationError) -> UnrecordableResult:
    """The error of an answer to `tools/call` that is not a `CallToolResult`: the call ran
    (its effect may be done), its result is unreadable."""
    return UnrecordableResult(
        f"the upstream sent a malformed tools/call result: {exc.errors()[:1]}",
        what="is not a valid MCP tools/call result",
    )
