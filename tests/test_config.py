"""The gateway configuration: the example parses; every error names file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.config import ConfigError, load_config, parse_config
from toolkeeper.server.build import upstream_params

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "toolkeeper.toml"


def test_the_commented_example_is_a_valid_configuration() -> None:
    config = load_config(EXAMPLE)
    assert config.upstreams["time"].command == "python"
    assert config.principals["demo"].token
    assert config.base_dir == str(EXAMPLE.parent)


def test_a_wrong_value_names_file_line_and_key() -> None:
    text = '[server]\nport = 8765\n\n[principals.alice]\ntoken = "t"\ngrants = "notes:*"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.file, error.value.line, error.value.key) == (
        "gw.toml",
        6,
        "principals.alice.grants",
    )
    assert str(error.value).startswith("gw.toml:6: principals.alice.grants: ")


def test_an_unknown_key_is_refused_with_its_line() -> None:
    text = '[upstreams.time]\ncommand = "x"\ntimeot = 3\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "upstreams.time.timeot")


def test_a_rule_in_an_array_of_tables_is_located_by_its_index() -> None:
    text = '[[rules]]\nkind = "deny"\n\n[[rules]]\nkind = "at_most"\nparam = "amount"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (4, "rules.1")


@pytest.mark.parametrize(
    ("setting", "key"),
    [("cap = nan", "rules.0.cap"), ('domains = ["example.com", "."]', "rules.0.domains.1")],
)
def test_a_rule_setting_that_would_let_everything_through_is_refused_with_its_key(
    setting: str, key: str
) -> None:
    # A cap of NaN, which no amount exceeds, or a domain naming no host (which every URL
    # without one matched), failed when the gateway was built, a bare ValueError, or not at all.
    kind = "at_most" if "cap" in setting else "domain_in"
    text = f'[[rules]]\nkind = "{kind}"\nparam = "amount"\n{setting}\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert error.value.key == key


def test_invalid_toml_names_its_line() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config("[server]\nport = = 3\n", file="gw.toml")
    assert error.value.line == 2


def test_an_upstream_needs_exactly_one_of_command_and_url() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config('[upstreams.x]\ncommand = "a"\nurl = "http://h/mcp"\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (1, "upstreams.x")


def test_a_token_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = '[principals.ci]\ntoken_env = "TK_TEST_TOKEN"\ngrants = ["*"]\n'
    monkeypatch.setenv("TK_TEST_TOKEN", "from-env")
    assert parse_config(text).principals["ci"].token == "from-env"
    monkeypatch.delenv("TK_TEST_TOKEN")
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (2, "principals.ci.token_env")


def test_two_principals_cannot_share_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """It was refused without a line, nor which principal's token it was."""
    text = '[principals.a]\ntoken = "same"\n[principals.b]\ngrants = []\ntoken = "same"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (5, "principals.b.token")
    monkeypatch.setenv("TK_TEST_TOKEN", "same")
    text = '[principals.a]\ntoken = "same"\n[principals.b]\ntoken_env = "TK_TEST_TOKEN"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (4, "principals.b.token_env")


def test_a_principal_takes_token_or_token_env_not_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """With both, token_env silently won: the token written in the file was not the one."""
    monkeypatch.setenv("TK_TEST_TOKEN", "from-env")
    text = '[principals.a]\ntoken = "inline"\ntoken_env = "TK_TEST_TOKEN"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "principals.a.token_env")


@pytest.mark.parametrize("token", ["caf\u00e9-token", "two words", "ends-in-newline\\n"])
def test_a_token_no_client_could_send_is_refused_with_its_line(token: str) -> None:
    text = f'[principals.a]\ngrants = ["*"]\ntoken = "{token}"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "principals.a.token")


def test_allowed_hosts_are_names_and_allowed_origins_are_origins() -> None:
    good = (
        '[server]\nallowed_hosts = ["mcp.example.com"]\n'
        'allowed_origins = ["https://app.example.com", "http://localhost:*", "http://[::1]:3000"]\n'
    )
    assert parse_config(good).server.allowed_hosts == ["mcp.example.com"]
    for key, value in [
        ("allowed_hosts", "mcp.example.com:443"),
        ("allowed_origins", "https://app.example.com/path"),
        ("allowed_origins", "app.example.com"),
    ]:
        with pytest.raises(ConfigError) as error:
            parse_config(f'[server]\nport = 1\n{key} = ["{value}"]\n', file="gw.toml")
        assert (error.value.line, error.value.key) == (3, f"server.{key}.0")


@pytest.mark.parametrize("host", ["999.1.1.1", "two words", "http://127.0.0.1", "localhost:80"])
def test_a_host_no_url_can_hold_is_refused_with_its_line(host: str) -> None:
    """The gateway names itself `http://HOST`: such a host passed here and failed at start,
    after the ledger and upstreams were opened, with a pydantic traceback."""
    with pytest.raises(ConfigError) as error:
        parse_config(f'[server]\nport = 1\nhost = "{host}"\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "server.host")
    assert "is not an IP address or a host name" in str(error.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "[::1]", "localhost", "gw.lan"])
def test_addresses_and_host_names_are_hosts(host: str) -> None:
    assert parse_config(f'[server]\nhost = "{host}"\n').server.host == host


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "nope.toml")
    assert error.value.line is None


def test_an_endpoint_path_must_start_with_a_slash() -> None:
    """`path = "mcp"` passed here and then failed at start with a routing traceback."""
    with pytest.raises(ConfigError) as error:
        parse_config('[server]\npath = "mcp"\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (2, "server.path")


@pytest.mark.parametrize(
    "url", ["https://api.example.com/openapi.json", "HTTP://api/o.json", "file:///etc/o.json"]
)
def test_an_openapi_document_named_by_url_is_refused_with_what_to_do(url: str) -> None:
    text = f'[http.pets]\nbase_url = "https://api.example.com"\nopenapi = "{url}"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "http.pets.openapi")
    assert "curl -o" in str(error.value) and "not a URL" in str(error.value)


def test_a_file_that_is_not_utf8_is_a_config_error_and_a_bom_is_fine(tmp_path: Path) -> None:
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe[server]\n")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(binary)
    marked = tmp_path / "bom.toml"
    marked.write_bytes(b"\xef\xbb\xbf[server]\nport = 9000\n")
    assert load_config(marked).server.port == 9000


def test_upstream_secrets_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`env`/`headers` were taken literally: a secret had to be written into the file."""
    monkeypatch.setenv("DOCS_TOKEN", "s3cret")
    text = (
        '[upstreams.docs]\nurl = "http://x/mcp"\n'
        'headers = { Authorization = "Bearer ${DOCS_TOKEN}" }\n'
        '[upstreams.t]\ncommand = "x"\nenv = { KEY = "${DOCS_TOKEN}", PLAIN = "$HOME" }\n'
    )
    config = parse_config(text, file="gw.toml")
    assert config.upstreams["docs"].headers == {"Authorization": "Bearer s3cret"}
    assert config.upstreams["t"].env == {"KEY": "s3cret", "PLAIN": "$HOME"}
    monkeypatch.delenv("DOCS_TOKEN")
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert error.value.line == 3 and "DOCS_TOKEN is unset" in str(error.value)


def test_an_upstream_secret_from_an_empty_variable_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`DOCS_TOKEN=` made the header `Bearer ` and the upstream refused every call."""
    monkeypatch.setenv("DOCS_TOKEN", "")
    text = '[upstreams.docs]\nurl = "http://x/mcp"\nheaders = { A = "Bearer ${DOCS_TOKEN}" }\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "upstreams.docs.headers.A")
    assert "DOCS_TOKEN" in error.value.reason


def test_budgets_are_configured_and_checked_with_their_line() -> None:
    config = parse_config(
        "[budgets]\nmax_calls_per_task = 5\nper_tool = { a = 1 }\ncalls_per_minute = 30\n",
        file="gw.toml",
    )
    assert config.budgets is not None and config.budgets.per_tool == {"a": 1}
    with pytest.raises(ConfigError) as error:
        parse_config("[budgets]\nburst = 0\n", file="gw.toml")
    assert (error.value.line, error.value.key) == (2, "budgets.burst")


def test_a_principals_tenant_cannot_be_empty() -> None:
    """`tenant = ""` passed here and then stopped `serve` with a traceback."""
    with pytest.raises(ConfigError) as error:
        parse_config('[principals.a]\ntoken = "t"\ntenant = ""\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "principals.a.tenant")


def test_tool_threads_is_a_server_setting_of_at_least_one() -> None:
    """`Keeper(tool_threads=...)` had no key: a gateway always ran 40 sync tools at most."""
    assert parse_config("[server]\ntool_threads = 4\n").server.tool_threads == 4
    with pytest.raises(ConfigError) as error:
        parse_config("[server]\nport = 1\ntool_threads = 0\n", file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "server.tool_threads")


def test_tokens_and_upstream_secrets_are_in_no_repr_or_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config's repr showed every token and expanded header, and pydantic's error for a
    wrongly typed token (kept as the ConfigError's context) quoted it."""
    monkeypatch.setenv("TK_TEST_SECRET", "s3cret-header")
    config = parse_config(
        '[principals.a]\ntoken = "secret-token-1"\n'
        '[upstreams.d]\nurl = "http://x/mcp"\nheaders = { A = "${TK_TEST_SECRET}" }\n'
        'env = { K = "${TK_TEST_SECRET}" }\n'
    )
    assert config.principals["a"].token == "secret-token-1"
    params = upstream_params("d", config.upstreams["d"], ".")
    for text in (repr(config), str(config), repr(config.principals["a"]), repr(params)):
        assert "secret-token-1" not in text and "s3cret-header" not in text
    with pytest.raises(ConfigError) as error:
        parse_config('[principals.a]\ntoken = ["secret-token-2"]\n')
    assert error.value.key == "principals.a.token"
    assert "secret-token-2" not in str(error.value)
    assert "secret-token-2" not in str(error.value.__context__)


@pytest.mark.parametrize(
    ("text", "line", "key", "meant"),
    [
        ("[server]\nport = 1\nprot = 2\n", 3, "server.prot", "port"),
        ('[principal.a]\ntoken = "t"\n', 1, "principal", "principals"),
        ('[principals.a]\ntoken = "t"\ngrant = ["*"]\n', 3, "principals.a.grant", "grants"),
        ('[[tools]]\nfiel = "t.py"\n', 2, "tools.0.fiel", "file"),
        (
            '[upstreams.t]\ncommand = "x"\n[upstreams.t.tools.a]\neffekt = "write"\n',
            4,
            "upstreams.t.tools.a.effekt",
            "effect",
        ),
    ],
)
def test_a_mistyped_key_is_refused_with_its_line_and_the_key_meant(
    text: str, line: int, key: str, meant: str
) -> None:
    """An unknown key said only 'Extra inputs are not permitted', and a mistyped table name
    (`[principal.a]`) had no line."""
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (line, key)
    assert f"did you mean {meant}?" in error.value.reason


def test_base_dir_is_the_files_folder_and_not_a_key_of_the_file(tmp_path: Path) -> None:
    """`base_dir = "/srv"` was accepted and then silently replaced by the file's folder."""
    (tmp_path / "gw.toml").write_text('base_dir = "/srv"\n')
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "gw.toml")
    assert (error.value.line, error.value.key) == (1, "base_dir")


@pytest.mark.parametrize("name", ["a.b", "a b", ""])
def test_an_upstream_name_that_cannot_begin_tool_names_is_refused_where_written(
    name: str,
) -> None:
    """It was refused by a regular expression, without its line when quoted with a dot
    (`[upstreams."a.b"]` was looked for as `upstreams.a.b`) and named as that key."""
    with pytest.raises(ConfigError) as error:
        parse_config(f'[server]\nport = 1\n[upstreams."{name}"]\ncommand = "x"\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (3, f'upstreams."{name}"')
    assert "NAME.tool" in error.value.reason


def test_a_reason_of_the_configurations_own_is_not_prefixed_by_pydantic() -> None:
    """Reasons read 'Value error, set exactly one of module and file'."""
    with pytest.raises(ConfigError) as error:
        parse_config("[[tools]]\n", file="gw.toml")
    assert error.value.reason == "set exactly one of module and file"


def test_a_missing_tools_file_is_refused_with_its_line(tmp_path: Path) -> None:
    """It was found only when the gateway was built, and reported without a line."""
    (tmp_path / "gw.toml").write_text('[[tools]]\nfile = "here.py"\n[[tools]]\nfile = "gone.py"\n')
    (tmp_path / "here.py").write_text("def register(keeper): pass\n")
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "gw.toml")
    assert (error.value.line, error.value.key) == (4, "tools.1.file")
    assert str(tmp_path / "gone.py") in error.value.reason


@pytest.mark.parametrize("url", ["mysql://db/x", "", "sqlite:/x.db", "memory"])
def test_a_ledger_url_naming_no_ledger_is_refused_with_its_line(url: str) -> None:
    """It was found only when the gateway was built, and reported without a line."""
    with pytest.raises(ConfigError) as error:
        parse_config(f'[server]\nport = 1\nledger = "{url}"\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "server.ledger")


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ('[server]\nport = "8765"\n', 2, "server.port"),
        ("[server]\nmax_result_chars = true\n", 2, "server.max_result_chars"),
        ('[budgets]\nmax_calls_per_task = "10"\n', 2, "budgets.max_calls_per_task"),
        ('[upstreams.time]\ncommand = "x"\ntimeout = "30"\n', 3, "upstreams.time.timeout"),
        (
            '[principals.a]\ntoken = "t"\napprove_by_elicitation = "no"\n',
            3,
            "principals.a.approve_by_elicitation",
        ),
    ],
)
def test_a_value_of_another_toml_type_is_refused_not_converted(
    text: str, line: int, key: str
) -> None:
    """`max_result_chars = true` would have been a limit of 1 character, and a quoted number
    or a "no" would have passed for what it looks like: each is refused where it is written."""
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (line, key)


def test_whole_numbers_serve_as_seconds_and_effects_are_read_from_text() -> None:
    text = (
        '[upstreams.time]\ncommand = "x"\ntimeout = 30\n'
        '[upstreams.time.tools.now]\neffect = "read_only"\n'
    )
    upstream = parse_config(text, file="gw.toml").upstreams["time"]
    assert upstream.timeout == 30.0
    assert upstream.tools["now"].effect is not None
    assert upstream.tools["now"].effect.value == "read_only"


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_timeout_or_rate_of_inf_or_nan_is_refused(value: str) -> None:
    """TOML writes `inf` and `nan`: `timeout = inf` was taken, and an upstream's tools then
    had no timeout at all (a hanging server held each call for ever)."""
    for text, key in (
        (f'[upstreams.time]\ncommand = "x"\ntimeout = {value}\n', "upstreams.time.timeout"),
        (f"[budgets]\ncalls_per_minute = {value}\n", "budgets.calls_per_minute"),
    ):
        with pytest.raises(ConfigError) as error:
            parse_config(text, file="gw.toml")
        assert error.value.key == key


@pytest.mark.parametrize(
    "url",
    ["localhost:8000/mcp", "ftp://h/mcp", "", "http://", "http:///mcp", "http://h:99999/mcp"],
)
def test_an_upstream_url_no_client_can_reach_is_refused_with_its_line(url: str) -> None:
    """It was taken, and the gateway served on, retrying it for ever with an error per try."""
    text = f'[server]\nport = 1\n[upstreams.docs]\nurl = "{url}"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (4, "upstreams.docs.url")


def test_an_upstream_url_with_a_password_is_refused_without_quoting_it() -> None:
    text = '[upstreams.docs]\nurl = "ftp://user:hunter2-secret@h/mcp"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert "hunter2-secret" not in str(error.value)


@pytest.mark.parametrize("url", ["http://h/mcp", "HTTPS://user:pw@h:8443/mcp", "http://[::1]:80/"])
def test_an_http_or_https_upstream_url_is_taken(url: str) -> None:
    config = parse_config(f'[upstreams.docs]\nurl = "{url}"\n', file="gw.toml")
    assert config.upstreams["docs"].url == url


@pytest.mark.parametrize(
    "url",
    [
        "redis://:pw@127.0.0.1:notaport/0",
        "redis://127.0.0.1:6379/0?socket_timout=1",
        "redis://127.0.0.1:6379/0?socket_timeout=0",
    ],
)
def test_a_redis_url_redis_py_cannot_take_is_refused_with_its_line(url: str) -> None:
    """It was found only when `toolkeeper serve` built the gateway, as a traceback."""
    text = f'[budgets]\ncalls_per_minute = 60\nrate_limiter = "{url}"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "budgets.rate_limiter")


@pytest.mark.parametrize("module", ["", ".tools", "tools.", "my tools"])
def test_a_tool_module_that_is_no_module_name_is_refused_with_its_line(module: str) -> None:
    """An empty or relative name reached importlib, and toolkeeper serve showed a traceback."""
    with pytest.raises(ConfigError) as error:
        parse_config(f'[server]\nport = 1\n[[tools]]\nmodule = "{module}"\n', file="gw.toml")
    assert (error.value.line, error.value.key) == (4, "tools.0.module")


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('command = ""', "upstreams.t.command"),
        ('command = "py\\u0000"', "upstreams.t.command"),
        ('command = "x"\nargs = ["-m", "a\\u0000b"]', "upstreams.t.args.1"),
        ('command = "x"\nenv = { "A=B" = "1" }', 'upstreams.t.env."A=B"'),
        ('command = "x"\nenv = { "" = "1" }', 'upstreams.t.env.""'),
        ('command = "x"\nenv = { A = "a\\u0000b" }', "upstreams.t.env.A"),
    ],
)
def test_an_upstream_no_process_could_be_started_as_is_refused(line: str, key: str) -> None:
    """The gateway served on, failing to start it at every reconnection attempt with an error
    that named neither the key nor the value ("illegal environment variable name")."""
    with pytest.raises(ConfigError) as error:
        parse_config(f"[upstreams.t]\n{line}\n", file="gw.toml")
    assert error.value.key == key


@pytest.mark.parametrize("grant", ['""', '" notes:write"', '"notes:write "', '":*"'])
def test_a_grant_that_names_no_permission_is_refused_with_its_line(grant: str) -> None:
    text = f'[principals.alice]\ntoken = "t"\ngrants = ["notes:read", {grant}]\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "principals.alice.grants.1")


def test_grants_given_as_text_not_a_list_are_refused_with_their_line() -> None:
    text = '[principals.alice]\ntoken = "t"\ngrants = "notes:*"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "principals.alice.grants")


def test_a_grant_with_a_wildcard_grants_cannot_match_is_refused_with_its_line() -> None:
    text = '[principals.alice]\ntoken = "t"\ngrants = ["notes:read", "airline:get_*"]\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text, file="gw.toml")
    assert (error.value.line, error.value.key) == (3, "principals.alice.grants.1")


def test_a_principals_client_answers_no_approval_unless_the_operator_lets_it() -> None:
    config = parse_config(
        '[principals.a]\ntoken = "t-a"\n[principals.b]\ntoken = "t-b"\n'
        "approve_by_elicitation = true\n",
        file="gw.toml",
    )
    assert not config.principals["a"].approve_by_elicitation
    assert config.principals["b"].approve_by_elicitation


def test_a_principals_client_names_no_task_unless_the_operator_lets_it() -> None:
    config = parse_config(
        '[principals.a]\ntoken = "t-a"\n[principals.b]\ntoken = "t-b"\nclient_task_ids = true\n',
        file="gw.toml",
    )
    assert not config.principals["a"].client_task_ids
    assert config.principals["b"].client_task_ids
