"""The MCP gateway over stdio, driven by the official `mcp` client: list the tools, call one,
see a write held for approval, approve it with `toolkeeper approvals approve`, and call again.

The gateway runs `examples/toolkeeper.toml` (the demo note tools and the mcp-server-time
upstream); its ledger, `./toolkeeper.db`, lands in the working directory, so the example runs
in a temporary one.

    python examples/gateway_client.py     # needs: pip install "toolkeeper[examples]"
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

CONFIG = Path(__file__).resolve().with_name("toolkeeper.toml")
TOOLKEEPER = [sys.executable, "-m", "toolkeeper"]


def text_of(result: object) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", []))


async def session(folder: Path) -> None:
    # `toolkeeper serve --config examples/toolkeeper.toml --stdio`, as an MCP client starts it
    gateway = StdioServerParameters(
        command=TOOLKEEPER[0],
        args=[*TOOLKEEPER[1:], "serve", "--config", str(CONFIG), "--stdio"],
        cwd=str(folder),
    )
    with anyio.fail_after(120):
        async with Client(gateway) as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            print("tools:", ", ".join(names))
            now = await client.call_tool("time.get_current_time", {"timezone": "UTC"})
            print("time.get_current_time:", "error" if now.is_error else "ok")
            held = await client.call_tool("demo.add_note", {"text": "buy milk"})
            meta = held.meta or {}
            print("demo.add_note:", meta.get("dev.toolkeeper/error-code"))
            approval = str(meta["dev.toolkeeper/approval-id"])
            # a person approves, from another shell, on the same ledger
            await anyio.run_process(
                [*TOOLKEEPER, "approvals", "approve", approval, "--by", "alice"], cwd=folder
            )
            print("approved by alice")
            # proposing the same call again runs it, once
            done = await client.call_tool("demo.add_note", {"text": "buy milk"})
            print("demo.add_note again:", text_of(done))
            notes = await client.call_tool("demo.list_notes", {})
            print("demo.list_notes:", text_of(notes))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(session, Path(folder))


if __name__ == "__main__":
    main()
