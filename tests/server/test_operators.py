"""Operators: found by token, roles in order, four eyes."""

from __future__ import annotations

import pytest

from toolkeeper.config_operators import OperatorConfig
from toolkeeper.server.operators import Operator, Operators


def _ops() -> Operators:
    return Operators.from_config(
        {
            "vic": OperatorConfig(token="vic-token-000000000", role="viewer"),
            "alma": OperatorConfig(
                token="alma-token-00000000", role="approver", principals=["alice"]
            ),
            "own": OperatorConfig(
                token="own-token-000000000",
                role="approver",
                principals=["alice"],
                approve_own=True,
            ),
        }
    )


@pytest.mark.parametrize(
    ("token", "name"),
    [("vic-token-000000000", "vic"), ("alma-token-00000000", "alma"), ("vic", None), ("", None)],
)
def test_a_token_names_its_operator_or_no_one(token: str, name: str | None) -> None:
    found = _ops().authenticate(token)
    assert (found.name if found else None) == name


def test_each_role_may_do_what_the_roles_before_it_may() -> None:
    viewer, approver, admin = (
        Operator(name=r, role=r, token="t" * 16) for r in ("viewer", "approver", "admin")
    )
    assert [viewer.may(r) for r in ("viewer", "approver", "admin")] == [True, False, False]
    assert [approver.may(r) for r in ("viewer", "approver", "admin")] == [True, True, False]
    assert [admin.may(r) for r in ("viewer", "approver", "admin")] == [True, True, True]


def test_four_eyes_unless_the_configuration_allows_approving_ones_own() -> None:
    ops = _ops().by_name
    assert not ops["alma"].may_approve_for("alice")
    assert ops["alma"].may_approve_for("bob")
    assert ops["own"].may_approve_for("alice")


def test_an_operators_token_stays_out_of_its_repr() -> None:
    assert "alma-token" not in repr(_ops().by_name["alma"])
