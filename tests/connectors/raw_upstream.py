"""An MCP server written without the SDK, as servers in other languages are (handshake era).

- `snippet` appends a line to the file named in its arguments (a write) and answers with text
  cut in the middle of an emoji, as a JavaScript server that slices a string by UTF-16 units
  does: `JSON.stringify` then sends the unpaired surrogate as the escape `"\\ud83d"`, which is
  valid JSON that the SDK's parser refuses.
- `report` (a write) declares an object output schema and answers in text only.
- `odd name` (read-only) has a name MCP clients cannot call as it is.
- `refuse` (a write too) answers with the JSON-RPC error -32000, the code servers commonly use
  for their own errors (and the SDK for a closed connection), without doing anything.
- `refuse_plainly` (a write) answers with a JSON-RPC error that is a string, not an error
  object, as a buggy server does, without doing anything.
- `garbled` (a write) does its write, then answers with a result that is no `CallToolResult`
  (`content` a string), as a buggy server does.
- `huge` (a write) does its write, then answers with 65 MiB of text: more than a line may be;
  `huge_last` the same, its message's `id` written last (as the TypeScript SDK writes it).
- `change` (read-only) announces a changed tool list: `{"then": "fail"}` makes the next
  `tools/list` fail once, `{"then": "add"}` adds the tool `late` to it.
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
REFUSE_PLAINLY = {**TOOL, "name": "refuse_plainly", "description": "Refuse every request."}
ODD = {
    "name": "odd name",
    "description": "Answer with a fixed text.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
GARBLED = {**TOOL, "name": "garbled", "description": "Record a request, answer garbled."}
CHANGE = {
    "name": "change",
    "description": "Announce a changed tool list.",
    "inputSchema": {"type": "object", "properties": {"then": {"enum": ["fail", "add"]}}},
    "annotations": {"readOnlyHint": True},
}
HUGE = {**TOOL, "name": "huge", "description": "Record a request, answer at length."}
HUGE_LAST = {**HUGE, "name": "huge_last"}
LATE = {**ODD, "name": "late", "description": "A tool added at run time."}
STATE = {"fail_list": False, "late": False}
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
        late = [LATE] if STATE["late"] else []
        return {
            "tools": [
                TOOL,
                REFUSE,
                REFUSE_PLAINLY,
                REPORT,
                ODD,
                GARBLED,
                HUGE,
                HUGE_LAST,
                CHANGE,
                *late,
            ]
        }
    if method == "tools/call" and params["name"] == "change":
        STATE["fail_list" if params["arguments"]["then"] == "fail" else "late"] = True
        return {"content": [{"type": "text", "text": "changed"}], "isError": False}
    if method == "tools/call" and params["name"] == "odd name":
        return {"content": [{"type": "text", "text": "odd"}], "isError": False}
    if method == "tools/call":
        with open(params["arguments"]["path"], "a", encoding="utf-8") as f:
            f.write("called\n")
        text = "smile \U0001f600".encode("utf-16-le")[:-2].decode("utf-16-le", "surrogatepass")
        if params["name"] == "report":
            text = "1 line recorded"
        if params["name"] == "garbled":
            return {"content": "done", "isError": False}
        if params["name"] in ("huge", "huge_last"):
            text = "x" * (65 * 2**20)
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


for line in sys.stdin:
    request = json.loads(line)
    if "id" in request and "method" in request:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        name = (request.get("params") or {}).get("name")
        if name == "refuse":
            reply["error"] = {"code": -32000, "message": "the ledger service said no"}
        elif name == "refuse_plainly":
            reply["error"] = "the ledger service said no"
        elif request["method"] == "tools/list" and STATE["fail_list"]:
            STATE["fail_list"] = False
            reply["error"] = {"code": -32603, "message": "the tool registry is reloading"}
        elif name == "huge_last":
            reply = {"result": answer(request), "jsonrpc": "2.0", "id": request["id"]}
        else:
            reply["result"] = answer(request)
        sys.stdout.write(json.dumps(reply) + "\n")  # ensure_ascii: "\ud83d" stays an escape
        if name == "change":
            changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            sys.stdout.write(json.dumps(changed) + "\n")
        sys.stdout.flush()
