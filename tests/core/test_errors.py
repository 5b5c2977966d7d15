import pytest

from toolkeeper.core.errors import ERROR_TABLE, ErrorCode, ToolError


def test_every_code_has_one_row_in_the_table() -> None:
    assert set(ERROR_TABLE) == set(ErrorCode)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_errors_round_trip_through_their_json_form(code: ErrorCode) -> None:
    error = ToolError.of(code, "m", details={"x": [1]}, retry_after=2.5)
    assert ToolError.from_dict(error.to_dict()) == error
    assert error.retryable is ERROR_TABLE[code].retryable


def test_retryable_can_be_overridden_per_error() -> None:
    assert ToolError.of(ErrorCode.TOOL_ERROR, "busy", retryable=True).retryable
