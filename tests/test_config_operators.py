"""`[operators.NAME]`: tokens of their own, roles, the principals they are."""

from __future__ import annotations

import pytest

from toolkeeper.config import ConfigError, parse_config

PRINCIPAL = '[principals.alice]\ntoken = "alice-token-0000000"\n'


def test_an_operator_has_a_role_and_the_principals_it_is() -> None:
    text = (
        PRINCIPAL
        + '[operators.olga]\ntoken = "olga-token-00000000"\nrole = "approver"\n'
        + 'principals = ["alice"]\n'
    )
    olga = parse_config(text).operators["olga"]
    assert (olga.role, olga.principals, olga.approve_own) == ("approver", ["alice"], False)


def test_an_operator_is_a_viewer_unless_told_otherwise() -> None:
    text = PRINCIPAL + '[operators.vic]\ntoken = "vic-token-000000000"\n'
    assert parse_config(text).operators["vic"].role == "viewer"


def test_an_operators_token_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TK_OPERATOR", "from-the-environment-1")
    text = PRINCIPAL + '[operators.ops]\ntoken_env = "TK_OPERATOR"\nrole = "admin"\n'
    assert parse_config(text).operators["ops"].token == "from-the-environment-1"


@pytest.mark.parametrize(
    ("table", "line", "key"),
    [
        ('token = "alice-token-0000000"', 4, "operators.o.token"),  # a principal's token
        ('token = "short"', 4, "operators.o.token"),
        ('token = "two words here, long"', 4, "operators.o.token"),
        ("", 3, "operators.o"),
        ('token = "olga-token-00000000"\nrole = "root"', 5, "operators.o.role"),
        ('token = "olga-token-00000000"\nprincipals = ["mallory"]', 5, "operators.o.principals.0"),
        ('token = "olga-token-00000000"\nsudo = true', 5, "operators.o.sudo"),
    ],
)
def test_a_wrong_operator_is_refused_with_its_line_and_key(table: str, line: int, key: str) -> None:
    text = PRINCIPAL + "[operators.o]\n" + table + "\n"
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (line, key)


def test_two_operators_cannot_share_a_token() -> None:
    text = (
        PRINCIPAL
        + '[operators.a]\ntoken = "same-token-00000000"\n'
        + '[operators.b]\ntoken = "same-token-00000000"\n'
    )
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert error.value.key == "operators.b.token"


def test_an_error_never_quotes_the_token() -> None:
    text = PRINCIPAL + '[operators.o]\ntoken = "alice-token-0000000"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert "alice-token-0000000" not in str(error.value)
