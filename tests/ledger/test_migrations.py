from __future__ import annotations

import pytest

from toolkeeper.core.errors import StoreError
from toolkeeper.ledger.migrations import LATEST, MIGRATIONS, missing


def test_steps_are_numbered_one_by_one() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST + 1))


def test_missing_lists_the_steps_not_applied_in_order() -> None:
    assert missing([]) == list(MIGRATIONS)
    assert missing(range(1, LATEST + 1)) == []


def test_a_version_newer_than_known_is_refused() -> None:
    with pytest.raises(StoreError, match="newer"):
        missing([LATEST + 1])
