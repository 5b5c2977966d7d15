"""Page queries and cursors, apart from any store (the stores: `pages_contract.py`)."""

from __future__ import annotations

import pytest

from toolkeeper.ledger.pages import CallCursor, CallQuery


def test_a_page_holds_one_to_five_hundred_calls() -> None:
    for limit in (0, 501):
        with pytest.raises(ValueError, match="page"):
            CallQuery(limit=limit)


@pytest.mark.parametrize("token", ["", "!!", "WzEsMl0", "WyJ4IiwiYSIsImIiXQ", "bnVsbA"])
def test_a_cursor_not_made_by_a_page_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="cursor"):
        CallCursor.decode(token)
