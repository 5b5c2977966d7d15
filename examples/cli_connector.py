"""Command-line programs as tools (`[commands.NAME]` in the gateway configuration): each
argument fills exactly one argv entry, and no shell ever reads it.

The example writes a text file and a configuration in a temporary folder, then calls
`wc -l` and `grep -n` through the keeper's pipeline; an argument full of shell syntax reaches
the program as one plain string.

    python examples/cli_connector.py     # needs: pip install "toolkeeper[server]"
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

from toolkeeper import ToolCall
from toolkeeper.config import load_config
from toolkeeper.server import build

CONFIG = """
[server]
ledger = "memory://"

[commands.text]
env_allow = ["LANG"]

[commands.text.tools.count_lines]
argv = ["wc", "-l", "--", "{path}"]
description = "Count the lines of a text file (an absolute path)."
effect = "read_only"

[commands.text.tools.find]
argv = ["grep", "-n", "--", "{pattern}", "{path}"]
description = "The numbered lines of a text file that match a pattern."
effect = "read_only"
success_codes = [0, 1]     # grep exits 1 when nothing matches: not a failure

[principals.app]
token = "app-token-0123456789"
grants = ["text:*"]
"""


async def run(folder: Path) -> None:
    notes = folder / "notes.txt"
    notes.write_text("buy milk\ncall Bob\nbuy stamps\n")
    (folder / "toolkeeper.toml").write_text(CONFIG)
    deployment = build(load_config(folder / "toolkeeper.toml"))
    async with deployment:
        keeper = deployment.keeper
        app = deployment.gateway.principals["app"].principal

        async def call(call_id: str, name: str, **arguments: str) -> None:
            result = await keeper.execute(
                ToolCall(call_id=call_id, name=name, arguments=arguments, principal=app)
            )
            data = result.data or {}
            if result.error is not None:
                print(f"{name}: {result.status.name} {result.error.code.name}")
            else:
                out = data["stdout"].replace(str(folder), "DIR")
                print(f"{name}: exit {data['exit_code']}, stdout {out!r}")

        await call("c1", "text.count_lines", path=str(notes))
        await call("c2", "text.find", pattern="buy", path=str(notes))
        await call("c3", "text.find", pattern="; rm -rf / #", path=str(notes))  # just a pattern
        await call("c4", "text.count_lines", path=str(folder / "missing.txt"))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(run, Path(folder))


if __name__ == "__main__":
    main()
