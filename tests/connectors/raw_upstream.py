"""An MCP server written without the SDK, as servers in other languages are (handshake era).

- `snippet` appends a line to the file named in its arguments (a write) and answers with text
  cut in the middle of an emoji, as a JavaScript server that slices a string by UTF-16 units
  does: `JSON.stringify` then sends the unpaired surrogate as the escape `"\\ud83d"`, which is
  valid JSON that the SDK's parser refuses.
- `report` (a write) declares an object output schema and answers in text only.
- `odd name` (read-only) has a name MCP clients cannot call as it is.
- `refuse` (a write too) answers with the JSON-RPC error -32000, the code servers commonly use
  for their own errors (and the SDK for a closed connection), without doing anything.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROTOCOL = "2025-06-18"
TOOL = {
    "name": "snippet",
    "description": "Record a request and answer with the first characters of a text.",
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": False},
}
REFUSE = {**TOOL, "name": "refuse", "description": "Refuse every request."}
ODD = {
    "name": "odd name",
    "description": "Answer with a fixed text.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
REPORT = {
    **TOOL,
    "name": "report",
    "description": "Record a request and report on it.",
    "outputSchema": {"type": "object", "properties": {"lines": {"type": "integer"}}},
}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        info = {"name": "raw-upstream", "version": "1.0"}
        return {"protocolVersion": PROTOCOL, "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "tools/list":
        return {"tools": [TOOL, REFUSE, REPORT, ODD]}
    if method == "tools/call" and params["name"] == "odd name":
        return {"content": [{"type": "text", "text": "odd"}], "isError": False}
    if method == "tools/call":
        with open(params["arguments"]["path"], "a", encoding="utf-8") as f:
            f.write("called\n")
        text = "smile \U0001f600".encode("utf-16-le")[:-2].decode("utf-16-le", "surrogatepass")
        if params["name"] == "report":
            text = "1 line recorded"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


for line in sys.stdin:
    request = json.loads(line)
    if "id" in request and "method" in request:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if (request.get("params") or {}).get("name") == "refuse":
            reply["error"] = {"code": -32000, "message": "the ledger service said no"}
        else:
            reply["result"] = answer(request)
        sys.stdout.write(json.dumps(reply) + "\n")  # ensure_ascii: "\ud83d" stays an escape
        sys.stdout.flush()
