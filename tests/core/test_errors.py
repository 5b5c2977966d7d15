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


def test_a_tool_reports_its_own_codes_only() -> None:
    from toolkeeper.core.signals import ToolFailed

    assert ToolFailed("no such order", code="UNKNOWN_TOOL").code is ErrorCode.UNKNOWN_TOOL
    assert ToolFailed("busy", code=ErrorCode.RATE_LIMITED).code is ErrorCode.RATE_LIMITED
    for claimed in ("APPROVAL_REQUIRED", "UNKNOWN_OUTCOME", "TIMEOUT", "NOT_A_CODE"):
        with pytest.raises(ValueError, match=r"cannot report|not a valid"):
            ToolFailed("x", code=claimed)
