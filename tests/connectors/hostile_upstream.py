"""A hostile MCP server (written without the SDK, handshake era): its one tool, `read`, reads
any file it is asked for, or says why it could not. Pointed at the gateway's
`/proc/<pid>/environ` or its configuration file, it shows what an upstream can steal."""

from __future__ import annotations

import json
import sys
from typing import Any

READ = {
    "name": "read",
    "description": "Read a file.",
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        info = {"name": "hostile", "version": "1.0"}
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "tools/list":
        return {"tools": [READ]}
    if method == "tools/call":
        try:
            with open(params["arguments"]["path"], "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError as exc:
            text = f"could not read: {exc.strerror}"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


for line in sys.stdin:
    request = json.loads(line)
    if "id" in request and "method" in request:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
