import pytest

from toolkeeper import Effect, Principal, ToolSpec
from toolkeeper.policy.grants import grant_matches, may_use, required_permissions


@pytest.mark.parametrize(
    ("grant", "permission", "expected"),
    [
        ("*", "orders:write", True),
        ("orders:*", "orders:write", True),
        ("orders:*", "orders:items:write", True),
        ("orders:*", "ordersx:write", False),
        ("orders:read", "orders:write", False),
        ("orders:read", "orders:read", True),
        ("Orders:read", "orders:read", False),
    ],
)
def test_grant_patterns(grant: str, permission: str, expected: bool) -> None:
    assert grant_matches(grant, permission) is expected


def test_a_tool_exists_only_in_its_tenants_and_environments() -> None:
    spec = ToolSpec(
        name="t",
        effect=Effect.READ_ONLY,
        tenants=frozenset({"acme"}),
        environments=frozenset({"prod"}),
    )
    assert may_use(Principal(id="a", tenant="acme", environment="prod"), spec)
    assert not may_use(Principal(id="a", tenant="globex", environment="prod"), spec)
    assert not may_use(Principal(id="a", tenant="acme", environment="dev"), spec)


def test_writes_without_declared_permissions_need_a_grant_of_their_own() -> None:
    assert required_permissions(ToolSpec(name="t", effect=Effect.READ_ONLY)) == ()
    assert required_permissions(ToolSpec(name="t", effect=Effect.WRITE)) == ("tool:t",)
    spec = ToolSpec(name="t", effect=Effect.DESTRUCTIVE, permissions=("db:drop",))
    assert required_permissions(spec) == ("db:drop",)


def test_one_name_given_as_text_is_one_name_not_its_characters() -> None:
    """`grants="orders:*"` held `"*"` as a substring and granted everything; `tenants="acme"`
    let tenant "a" in and kept "acme" out."""
    admin = ToolSpec(name="admin.delete", effect=Effect.DESTRUCTIVE, permissions="admin:delete")  # type: ignore[arg-type]
    clerk = Principal(id="c", grants="orders:*")  # type: ignore[arg-type]
    assert clerk.grants == frozenset({"orders:*"})
    assert not may_use(clerk, admin)
    assert admin.permissions == ("admin:delete",)
    local = ToolSpec(name="t", effect=Effect.READ_ONLY, tenants="acme", environments=["prod"])  # type: ignore[arg-type]
    assert may_use(Principal(id="a", tenant="acme", environment="prod"), local)
    assert not may_use(Principal(id="a", tenant="a", environment="p"), local)


@pytest.mark.parametrize(
    "bad", [{"id": 5}, {"id": ""}, {"id": "a\x00b"}, {"id": "a", "tenant": ""}]
)
def test_principal_ids_are_text_every_ledger_keeps_as_it_is(bad: dict[str, object]) -> None:
    """An int id read back from SQL as "5" was another principal (CALL_ID_CONFLICT on its own
    call); a NUL was an INTERNAL_ERROR on PostgreSQL."""
    with pytest.raises(ValueError, match="Principal"):
        Principal(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("grant", [None, b"orders:*", 5])
def test_a_grant_that_is_not_text_is_refused_when_the_principal_is_made(grant: object) -> None:
    """A grant of None (a NULL column) or bytes made every call of the principal fail as an
    INTERNAL_ERROR with a traceback, when its grants were matched."""
    with pytest.raises(ValueError, match=r"Principal\.grants"):
        Principal(id="a", grants=["orders:read", grant])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "grant", ["airline:get_*", "air*", "*:read", "orders:*:write", "orders:re?d", "orders:[rw]"]
)
def test_a_grant_with_a_wildcard_grants_cannot_match_is_refused_when_made(grant: str) -> None:
    """Rules take globs, grants do not: `airline:get_*` was accepted and matched nothing, so
    the operator believed a permission granted that no call ever got."""
    with pytest.raises(ValueError, match=r"Principal\.grants"):
        Principal(id="a", grants=["orders:read", grant])


@pytest.mark.parametrize("grant", ["", ":*", " orders:read", "orders:read ", "orders:*\n", "\t*"])
def test_a_grant_that_names_no_permission_is_refused_when_made(grant: str) -> None:
    """An empty grant, or one with a space at an end, was accepted and matched nothing."""
    with pytest.raises(ValueError, match=r"Principal\.grants"):
        Principal(id="a", grants=["orders:read", grant])


@pytest.mark.parametrize(
    "grant", ["*", "orders:*", "orders:items:*", "orders:read", "raw:odd name"]
)
def test_every_grant_pattern_that_matches_is_accepted(grant: str) -> None:
    assert Principal(id="a", grants=[grant]).grants == frozenset({grant})
