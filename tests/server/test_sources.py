"""HTTP services and programs configured in `toolkeeper.toml` become tools of the gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeeper import CallStatus, Effect, ErrorCode, Principal, ToolCall
from toolkeeper.config import ConfigError, load_config, parse_config
from toolkeeper.server import build

from ..connectors.http_service import PETS_OPENAPI, Service, running_service

pytestmark = pytest.mark.anyio

ALICE = Principal(id="alice", grants=frozenset({"pets:*", "files:*"}))


@pytest.fixture
def service() -> Iterator[Service]:
    with running_service() as running:
        yield running


def _config(tmp_path: Path, service: Service) -> Path:
    (tmp_path / "pets.json").write_text(json.dumps(PETS_OPENAPI))
    (tmp_path / "work").mkdir()
    path = tmp_path / "toolkeeper.toml"
    path.write_text(
        f"""
[server]
ledger = "sqlite:///{tmp_path / "ledger.db"}"

[http.pets]
base_url = "{service.url}"
openapi = "pets.json"
allow_networks = ["127.0.0.1/32"]
headers = {{ Authorization = "Bearer ${{TK_PETS_TOKEN}}" }}

[http.pets.tools.addPet]
idempotent = true

[http.pets.endpoints.echo]
method = "GET"
path = "/echo-headers"
effect = "read_only"

[commands.files]
sandbox = {{ writable = "work" }}

[commands.files.tools.count]
argv = ["wc", "-c", "--", "{{name}}"]
effect = "read_only"
description = "Count the bytes of a file in the work folder."

[commands.files.tools.fail]
argv = ["sh", "-c", "exit 2"]
exit_codes = {{ "2" = "INVALID_ARGUMENTS" }}

[principals.alice]
token = "alice-token-0123456789"
grants = ["pets:*", "files:*"]
"""
    )
    return path


async def test_configured_http_and_command_tools_run_through_the_keeper(
    tmp_path: Path, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_PETS_TOKEN", "pets-token-0123456789")
    config = load_config(_config(tmp_path, service))
    (tmp_path / "work" / "notes.txt").write_text("twelve bytes")
    async with build(config) as deployment:
        keeper = deployment.keeper
        specs = {s.name: s for s in keeper.catalog.specs()}
        got = await keeper.execute(
            ToolCall(call_id="g", name="pets.getPet", arguments={"petId": "1"}, principal=ALICE)
        )
        echo = await keeper.execute(ToolCall(call_id="e", name="pets.echo", principal=ALICE))
        count = await keeper.execute(
            ToolCall(
                call_id="c", name="files.count", arguments={"name": "notes.txt"}, principal=ALICE
            )
        )
        failed = await keeper.execute(ToolCall(call_id="f", name="files.fail", principal=ALICE))
    assert specs["pets.addPet"].idempotent is True
    assert specs["pets.echo"].effect is Effect.READ_ONLY
    assert got.status is CallStatus.SUCCEEDED and got.data["name"] == "Rex"
    assert service.seen[1].headers["authorization"] == "Bearer pets-token-0123456789"
    assert "pets-token-0123456789" not in json.dumps(echo.data)
    assert count.data["stdout"].split() == ["12", "notes.txt"]
    assert failed.error is not None and failed.error.code is ErrorCode.INVALID_ARGUMENTS


def test_an_http_source_and_an_upstream_may_not_share_a_name() -> None:
    text = """
[upstreams.pets]
command = "python"

[http.pets]
base_url = "https://api.example.com"
endpoints.list = { method = "GET", path = "/pets" }
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.key == "http.pets"


def test_a_command_may_not_claim_a_code_only_the_pipeline_says() -> None:
    text = """
[commands.x.tools.y]
argv = ["true"]
exit_codes = { "1" = "UNKNOWN_OUTCOME" }
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.key.startswith("commands.x.tools.y.exit_codes")


def test_an_unset_variable_in_an_http_header_is_the_files_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TK_NOT_SET", raising=False)
    text = """
[http.docs]
base_url = "https://api.example.com"
headers = { Authorization = "Bearer ${TK_NOT_SET}" }
endpoints.search = { method = "GET", path = "/search" }
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.key == "http.docs.headers.Authorization"


@pytest.mark.parametrize(
    "table",
    [
        '[upstreams.docs]\nurl = "https://mcp.example.com/mcp"\nsandbox = {}',
        '[upstreams.docs]\ncommand = "python"\ncwd = "x"\nsandbox = {}',
        '[commands.docs]\ncwd = "x"\nsandbox = {}',
    ],
)
def test_a_sandbox_is_for_a_stdio_upstream_or_a_program_in_its_own_folder(table: str) -> None:
    with pytest.raises(ConfigError):
        parse_config(table)


def test_an_upstreams_sandbox_paths_are_the_config_files(tmp_path: Path) -> None:
    from toolkeeper.connectors.sandbox import Sandbox
    from toolkeeper.server.build import upstream_params

    text = """
[upstreams.files]
command = "python"
sandbox = { read_only = ["servers"], writable = "work", network = true }
"""
    config = parse_config(text, base_dir=str(tmp_path))
    params = upstream_params("files", config.upstreams["files"], config.base_dir)
    assert params.sandbox == Sandbox(
        network=True, read_only=(str(tmp_path / "servers"),), writable=str(tmp_path / "work")
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [("pets.json", "{not json"), ("pets.yaml", "a: [b"), ("pets.json", '{"swagger": "2.0"}')],
)
async def test_an_openapi_document_that_cannot_be_read_is_a_configuration_error(
    tmp_path: Path, name: str, text: str
) -> None:
    from toolkeeper.core.errors import ConfigurationError

    (tmp_path / name).write_text(text)
    config = parse_config(
        f'[http.pets]\nbase_url = "https://api.example.com"\nopenapi = "{name}"',
        base_dir=str(tmp_path),
    )
    with pytest.raises(ConfigurationError, match=r"\[http\.pets\] openapi"):
        build(config)


def test_a_command_tools_name_is_one_plain_word() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config('[commands.files.tools."a.b"]\nargv = ["true"]')
    assert caught.value.key.startswith("commands.files.tools")
