"""An MCP server (without the SDK) whose one tool, `login`, echoes its sensitive `token`
(`writeOnly` in its schema) in every way an upstream answers: `{"how": ...}` picks
`text` (a text block, the token as JSON escapes too), `structured` (structured content),
`is_error` (an error result), `rpc_error` (a JSON-RPC error), `garbled` (a result that is no
`CallToolResult`, the token in it) or `huge` (a line longer than a message may be, the token
first)."""

from __future__ import annotations

import json
import sys
from typing import Any

LOGIN = {
    "name": "login",
    "description": "Log in, and say so.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "token": {"type": "string", "writeOnly": True},
            "how": {"enum": ["text", "structured", "is_error", "rpc_error", "garbled", "huge"]},
        },
        "required": ["token", "how"],
    },
    "annotations": {"readOnlyHint": True},
}


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def reply(request: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        info = {"name": "leaky-upstream", "version": "1.0"}
        out["result"] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": info,
        }
    elif method == "tools/list":
        out["result"] = {"tools": [LOGIN]}
    elif method == "tools/call":
        token, how = params["arguments"]["token"], params["arguments"]["how"]
        said = f"welcome {token} ({_escaped(token)})"
        text = [{"type": "text", "text": said}]
        if how == "rpc_error":
            out["error"] = {"code": -32000, "message": f"bad token {token}"}
        elif how == "garbled":
            out["result"] = {"content": said}
        elif how == "huge":
            # (the result first, the token with it: the first bytes of the line hold it)
            out = {
                "result": {"content": [{"type": "text", "text": said + "x" * 65 * 2**20}]},
                **out,
            }
        else:
            out["result"] = {"content": text, "isError": how == "is_error"}
            if how == "structured":
                out["result"]["structuredContent"] = {"said": said, "token": token}
    else:
        out["result"] = {}
    return out


for line in sys.stdin:
    request = json.loads(line)
    if "id" in request and "method" in request:
        sys.stdout.write(json.dumps(reply(request)) + "\n")
        sys.stdout.flush()
