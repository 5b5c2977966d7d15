"""A small MCP server over stdio for the connector and gateway tests.

Its tools exercise what mcp-server-time and mcp-server-git cannot: the idempotency key received
in `_meta`, a tool list that changes at run time, pagination, a call that never answers, a
write that answers when the test lets it, and a process that dies in the middle of a call.
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Any

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("toolkeeper-test-upstream")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str, ctx: Context) -> dict[str, Any]:
    """Return the text, the idempotency key the caller sent, the request's id and the trace
    context it carried (`traceparent`), if any."""
    meta = ctx.request_context.meta or {}
    trace = {k: meta[k] for k in ("traceparent",) if k in meta}  # (W3C, SEP-414)
    return {
        "text": text,
        "key": meta.get("dev.toolkeeper/idempotency-key"),
        "request_id": str(ctx.request_id),
        **trace,
    }


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def append_line(path: str, line: str) -> str:
    """Append a line to a file (a write that is not idempotent)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return "appended"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def append_when_released(path: str, line: str, gate: str) -> str:
    """Append a line to a file, then answer once a byte can be read from the FIFO `gate`."""
    with open(path, "a", encoding="utf-8") as f:  # noqa: ASYNC230 - a test's small file
        f.write(line + "\n")
    await anyio.to_thread.run_sync(_take_a_byte, gate)
    return "appended"


def _take_a_byte(fifo: str) -> None:
    with open(fifo, "rb", buffering=0) as f:
        f.read(1)


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 20).decode()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> mcp_types.CallToolResult:
    """A caption and an image."""
    return mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="a picture"),
            mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        ]
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def die_midway(path: str) -> str:
    """Write a marker, then kill this server process before answering."""
    with open(path, "a", encoding="utf-8") as f:
        f.write("started\n")
    os._exit(17)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def hang(path: str = "") -> str:
    """Never answer; note in `path` (when given) that the caller cancelled the request."""
    try:
        await anyio.sleep_forever()
    finally:
        if path:
            with open(path, "a", encoding="utf-8") as f:  # noqa: ASYNC230 - cancelled: no await
                f.write("cancelled\n")
    return "unreachable"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def add_tool(name: str, ctx: Context) -> str:
    """Add a read-only tool named `name` and announce the change."""

    def extra() -> str:
        return name

    server.add_tool(extra, name=name, annotations=ToolAnnotations(read_only_hint=True))
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()
    else:
        await ctx.request_context.session.send_tool_list_changed()
    return "added"


for i in range(int(os.environ.get("EXTRA_TOOLS", "0"))):

    def _filler(n: int = i) -> int:
        return n

    server.add_tool(_filler, name=f"filler_{i}", annotations=ToolAnnotations(read_only_hint=True))


PAGE_SIZE = int(os.environ.get("PAGE_SIZE", "0"))

if PAGE_SIZE:
    import mcp_types

    async def paged_list_tools(
        ctx: Any, params: mcp_types.PaginatedRequestParams
    ) -> mcp_types.ListToolsResult:
        """tools/list in pages of PAGE_SIZE, the cursor being the next offset."""
        tools = await server.list_tools()
        start = int(params.cursor or 0)
        end = start + PAGE_SIZE
        return mcp_types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    server._lowlevel_server.add_request_handler(
        "tools/list", mcp_types.PaginatedRequestParams, paged_list_tools
    )


if __name__ == "__main__":
    if "--http" in sys.argv:
        server.run("streamable-http")
    else:
        server.run()
