"""What `build` makes of a configuration: paths in it are the file's, wherever it is run."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from toolkeeper import Effect, ErrorCode, ToolCall
from toolkeeper.catalog.registry import Catalog
from toolkeeper.config import load_config
from toolkeeper.connectors.mcp import McpUpstream
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.server import build
from toolkeeper.server.build import upstream_params

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "toolkeeper.toml"

TOOLS = '''
from toolkeeper import Keeper


def register(keeper: Keeper) -> None:
    @keeper.tool(name="files.read", effect="read_only", permissions=["files:read"])
    def read(path: str) -> str:
        """Read a text file.

        Args:
            path: The file.
        """
        with open(path) as file:
            return file.read()
'''

MOVE = '''
from toolkeeper import Keeper


def register(keeper: Keeper) -> None:
    @keeper.tool(name="files.move", effect="write", permissions=["files:write"])
    def move(source: str, destination: str) -> str:
        """Move a file.

        Args:
            source: The file.
            destination: Where it goes.
        """
        return f"moved {source} to {destination}"
'''


async def test_a_relative_sandbox_root_is_the_config_files_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox moved with the directory `serve` was started from: the project's own files
    were refused and another folder's were served."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    for folder in (project / "sandbox", elsewhere / "sandbox"):
        folder.mkdir(parents=True)
        (folder / "note.txt").write_text(f"in {folder.parent.name}")
    (project / "files.py").write_text(TOOLS)
    (project / "gw.toml").write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n'
        '[[tools]]\nfile = "files.py"\n'
        '[[rules]]\nkind = "path_inside"\nparam = "path"\nroot = "./sandbox"\n'
        '[principals.reader]\ntoken = "t"\ngrants = ["files:read"]\n'
    )
    monkeypatch.chdir(elsewhere)
    async with build(load_config(project / "gw.toml")) as deployment:
        reader = deployment.gateway.principals["reader"].principal

        async def read(path: Path) -> object:
            call = ToolCall(
                call_id=str(path),
                name="files.read",
                arguments={"path": str(path)},
                principal=reader,
            )
            return await deployment.keeper.execute(call)

        inside = await read(project / "sandbox" / "note.txt")
        outside = await read(elsewhere / "sandbox" / "note.txt")
    assert getattr(inside, "data", None) == "in project"
    error = getattr(outside, "error", None)
    assert error is not None and error.code is ErrorCode.PERMISSION_DENIED


def test_two_tool_files_registering_one_name_is_a_configuration_error(tmp_path: Path) -> None:
    """The last one silently won: a read-only tool became destructive."""
    for name, effect in (("a", "read_only"), ("b", "destructive")):
        (tmp_path / f"{name}.py").write_text(
            "def register(keeper):\n"
            f"    @keeper.tool(name='x.t', effect='{effect}')\n"
            "    def t() -> str:\n"
            "        return 'x'\n"
        )
    (tmp_path / "gw.toml").write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n'
        '[[tools]]\nfile = "a.py"\n[[tools]]\nfile = "b.py"\n'
    )
    with pytest.raises(ConfigurationError, match=r"tools\[1\] \(b.py\): registers 'x.t', as "):
        build(load_config(tmp_path / "gw.toml"))


async def test_configured_budgets_hold_for_the_gateways_calls(tmp_path: Path) -> None:
    """`[budgets]` was refused as an unknown section: a gateway had no budgets at all."""
    (tmp_path / "files.py").write_text(TOOLS)
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "a.txt").write_text("a")
    (tmp_path / "gw.toml").write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n'
        '[[tools]]\nfile = "files.py"\n'
        "[budgets]\nmax_calls_per_task = 1\ncalls_per_minute = 600\n"
        'rate_limiter = "redis://127.0.0.1:6379/0"\n'
        '[principals.reader]\ntoken = "t"\ngrants = ["files:read"]\n'
    )
    async with build(load_config(tmp_path / "gw.toml")) as deployment:
        reader = deployment.gateway.principals["reader"].principal
        path = str(tmp_path / "sandbox" / "a.txt")
        results = [
            await deployment.keeper.execute(
                ToolCall(
                    call_id=f"c{i}",
                    task_id=f"budget-{tmp_path.name}",
                    name="files.read",
                    arguments={"path": path},
                    principal=reader,
                )
            )
            for i in range(2)
        ]
    assert results[0].ok
    assert results[1].error is not None and results[1].error.code is ErrorCode.BUDGET_EXCEEDED


def test_configured_tool_threads_are_the_keepers(tmp_path: Path) -> None:
    """`[server] tool_threads` did not exist: a gateway's sync tools always had 40 threads."""
    (tmp_path / "gw.toml").write_text('[server]\nledger = "memory://"\ntool_threads = 2\n')
    deployment = build(load_config(tmp_path / "gw.toml"))
    assert deployment.keeper.thread_limiter.total_tokens == 2


def test_configured_ledger_pool_size_is_the_postgresql_stores(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = "postgresql://postgres@127.0.0.1:5432/test"
    (tmp_path / "gw.toml").write_text(f'[server]\nledger = "{url}"\nledger_pool_size = 7\n')
    deployment = build(load_config(tmp_path / "gw.toml"))
    assert deployment.keeper.store.pool_size == 7
    (tmp_path / "sq.toml").write_text('[server]\nledger = "sqlite:///l.db"\nledger_pool_size = 7\n')
    assert build(load_config(tmp_path / "sq.toml")).keeper.store.path.endswith("l.db")


async def test_a_relative_path_is_refused_not_checked_against_one_folder_and_opened_in_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule resolved `gw.toml` against its root and passed it; the tool opened it against
    the working directory: a read-only token read the gateway's own config, every token."""
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "files.py").write_text(TOOLS)
    (tmp_path / "gw.toml").write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n'
        '[[tools]]\nfile = "files.py"\n'
        '[[rules]]\nkind = "path_inside"\nparam = "path"\nroot = "./sandbox"\n'
        '[principals.reader]\ntoken = "reader-token-secret"\ngrants = ["files:read"]\n'
    )
    monkeypatch.chdir(tmp_path)
    async with build(load_config(tmp_path / "gw.toml")) as deployment:
        reader = deployment.gateway.principals["reader"].principal
        call = ToolCall(call_id="1", name="files.read", arguments={"path": "gw.toml"})
        result = await deployment.keeper.execute(msgspec.structs.replace(call, principal=reader))
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert "reader-token-secret" not in repr(result)


async def test_the_examples_time_tools_are_read_only_though_their_hints_are_not_trusted(
    tmp_path: Path,
) -> None:
    """`make run` serves mcp-server-time, whose hints are not trusted: the example states its
    two tools read-only, so the demo's clock reads need no approval."""
    config = load_config(EXAMPLE)
    time = config.upstreams["time"].model_copy(update={"command": sys.executable})
    catalog = Catalog()
    async with McpUpstream(upstream_params("time", time, config.base_dir), catalog):
        effects = {t.spec.name: t.spec.effect for t in catalog}
    assert effects == {
        "time.get_current_time": Effect.READ_ONLY,
        "time.convert_time": Effect.READ_ONLY,
    }
    assert not config.upstreams["time"].trust_hints


@pytest.mark.parametrize(("tools", "moved"), [('["files.*"]', False), ('["*"]', True)])
async def test_a_rule_naming_tools_refuses_a_named_tool_that_lacks_its_parameter(
    tmp_path: Path, tools: str, moved: bool
) -> None:
    """A path_inside rule for `files.*` on `path` skipped `files.move(source, destination)`,
    which then moved /etc/passwd out of (and anything into) the sandbox; a rule for every
    tool still skips the tools without the parameter."""
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "files.py").write_text(TOOLS)
    (tmp_path / "move.py").write_text(MOVE)
    (tmp_path / "gw.toml").write_text(
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n'
        '[[tools]]\nfile = "files.py"\n[[tools]]\nfile = "move.py"\n'
        f'[[rules]]\ntools = {tools}\nkind = "path_inside"\nparam = "path"\n'
        'root = "./sandbox"\n'
        '[principals.writer]\ntoken = "t"\ngrants = ["files:*"]\n'
    )
    async with build(load_config(tmp_path / "gw.toml")) as deployment:
        writer = deployment.gateway.principals["writer"].principal
        result = await deployment.keeper.execute(
            ToolCall(
                call_id="m1",
                name="files.move",
                arguments={"source": "/etc/passwd", "destination": str(tmp_path / "sandbox")},
                principal=writer,
            )
        )
    if moved:
        assert result.error is None
    else:
        assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
