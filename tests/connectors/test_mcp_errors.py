"""The errors of one upstream call, mapped by whether its request reached the server."""

from collections.abc import Callable

import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from toolkeeper.connectors._mcp_errors import Failure, _failure, map_mcp_errors
from toolkeeper.connectors._mcp_pipe import AnswerTooLarge, LaneClosed, PeerError
from toolkeeper.connectors._mcp_trace import until_answered
from toolkeeper.connectors.base import UnrecordableResult, UpstreamUnavailable
from toolkeeper.core import OutcomeUnknown, ToolFailed


class _Edge:
    """What the upstream answers the mapping, and what it was told."""

    def __init__(self, *, unsent: bool = False, forgotten: bool = False) -> None:
        self.unsent = unsent
        self.forgotten = forgotten
        self.lost = 0

    def map(self, exc: Exception) -> BaseException:
        mapping = map_mcp_errors(
            "up", lost=self._lose, unsent=lambda: self.unsent, forgotten=lambda: self.forgotten
        )
        with pytest.raises(Exception) as raised, mapping:  # noqa: PT011 - any mapped error
            raise exc
        assert raised.value.__cause__ is (None if raised.value is exc else exc)
        return raised.value

    def _lose(self) -> None:
        self.lost += 1


def _sdk(code: int) -> MCPError:
    return MCPError(code, "the SDK's or the server's error")


def _invalid() -> ValidationError:
    class Result(BaseModel):
        content: list[int]

    try:
        Result.model_validate({"content": "no"})
    except ValidationError as exc:
        return exc
    raise AssertionError("validated")


@pytest.mark.parametrize(
    ("exc", "edge", "mapped", "lost"),
    [
        (LaneClosed("closed", sent=False), _Edge(), UpstreamUnavailable, 1),
        (LaneClosed("closed", sent=True), _Edge(), OutcomeUnknown, 1),
        (_sdk(mcp_types.CONNECTION_CLOSED), _Edge(unsent=True), UpstreamUnavailable, 1),
        (_sdk(mcp_types.CONNECTION_CLOSED), _Edge(), OutcomeUnknown, 1),
        (_sdk(mcp_types.REQUEST_TIMEOUT), _Edge(), TimeoutError, 0),
        (TimeoutError(), _Edge(), TimeoutError, 0),
        (_sdk(mcp_types.INVALID_REQUEST), _Edge(forgotten=True), UpstreamUnavailable, 0),
        (_sdk(mcp_types.INVALID_PARAMS), _Edge(), ToolFailed, 0),
        # The server's own error, whatever its code: it answered, so it is alive.
        (PeerError(mcp_types.CONNECTION_CLOSED, "no"), _Edge(forgotten=True), ToolFailed, 0),
        (AnswerTooLarge("long"), _Edge(), UnrecordableResult, 0),
        (_invalid(), _Edge(), UnrecordableResult, 0),
    ],
)
def test_an_error_is_mapped_by_whether_the_request_reached_the_server(
    exc: Exception, edge: _Edge, mapped: type[Exception], lost: int
) -> None:
    assert type(edge.map(exc)) is mapped
    assert edge.lost == lost


@pytest.mark.parametrize("make", [lambda: ValueError("ours"), lambda: RuntimeError("ours")])
def test_an_error_that_is_no_call_error_passes_unchanged(make: Callable[[], Exception]) -> None:
    exc = make()
    assert _Edge().map(exc) is exc


class _Span:
    """A request's span as `until_answered` ends it (the `RequestTrace` protocol)."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.ends: list[tuple[int | None, str | None]] = []

    def ended(self, status_code: int | None, error_type: str | None) -> None:
        self.ends.append((status_code, error_type))


@pytest.mark.parametrize(
    ("exc", "end"),
    [
        (PeerError(mcp_types.CONNECTION_CLOSED, "the server's own"), (-32000, None)),
        (_sdk(mcp_types.INVALID_PARAMS), (mcp_types.INVALID_PARAMS, None)),
        (_sdk(mcp_types.CONNECTION_CLOSED), (None, "connection_closed")),
        (_sdk(mcp_types.REQUEST_TIMEOUT), (None, "timeout")),
        (LaneClosed("gone", sent=True), (None, "LaneClosed")),
    ],
)
def test_a_request_span_says_an_answer_came_only_when_the_server_gave_one(
    exc: Exception, end: tuple[int | None, str | None]
) -> None:
    span = _Span()
    with pytest.raises(type(exc)), until_answered(span):
        raise exc
    assert span.ends == [end]
    # (the same reading as the call's: no answer is no server error)
    failure = _failure(exc, lost=lambda: None, unsent=lambda: False, forgotten=lambda: False)
    assert (failure is Failure.SERVER_ERROR) == (end[0] is not None)
