from __future__ import annotations

import toolkeeper.ledger as ledger


def test_every_public_name_of_the_package_is_exported() -> None:
    public = {
        name
        for name, value in vars(ledger).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith(ledger.__name__)
    }
    assert public == set(ledger.__all__) - {"PostgresStore"}
