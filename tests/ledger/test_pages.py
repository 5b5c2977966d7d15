"""Page queries and cursors, apart from any store (the stores: `pages_contract.py`)."""

from __future__ import annotations

import pytest

from toolkeeper.ledger.pages import CallCursor, CallQuery, moment


def test_a_page_holds_one_to_five_hundred_calls() -> None:
    for limit in (0, 501):
        with pytest.raises(ValueError, match="page"):
            CallQuery(limit=limit)


@pytest.mark.parametrize("token", ["", "!!", "WzEsMl0", "WyJ4IiwiYSIsImIiXQ", "bnVsbA"])
def test_a_cursor_not_made_by_a_page_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="cursor"):
        CallCursor.decode(token)


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("2026-01-01T00:00:00Z", 1767225600.0),
        ("2026-01-01", 1767225600.0),  # no zone: UTC
        ("2026-01-01T01:00:00+01:00", 1767225600.0),
        ("1767225600.5", 1767225600.5),
        ("90s", 10_000.0 - 90),
        ("15m", 10_000.0 - 900),
        ("2h", 10_000.0 - 7200),
        ("1d", 10_000.0 - 86400),
        ("1w", 10_000.0 - 604800),
    ],
)
def test_a_moment_is_a_time_epoch_seconds_or_a_span_ago(text: str, at: float) -> None:
    assert moment(text, now=10_000.0) == at


@pytest.mark.parametrize("text", ["yesterday", "5x", "-1h", "nan", "inf", ""])
def test_a_moment_it_cannot_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="time"):
        moment(text, now=10_000.0)
