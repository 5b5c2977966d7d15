"""`tools/call` over the stdio gateway, which answers it without the SDK's request machinery:
approvals in both protocol eras (by error result and by elicitation), the wire shape of its
answers, errors, and a call the client cancels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import pytest
from mcp import Client
from mcp_types import methods

from toolkeeper.core import CallStatus
from toolkeeper.ledger import CallRecord, open_store
from toolkeeper.policy.approvals import Approvals

from .conftest import config_text
from .test_gateway import answering, code_of
from .test_transports import stdio_server

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def calls_in(tmp_path: Path) -> list[CallRecord]:
    async with open_store(f"sqlite:///{tmp_path}/ledger.db") as store:
        return list(await store.list_calls())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_approval_named_in_the_result_over_stdio_lets_the_same_call_run_once(
    config_file: Path, tmp_path: Path, mode: Literal["auto", "legacy"]
) -> None:
    with anyio.fail_after(60):
        async with Client(stdio_server(config_file), mode=mode) as alice:
            pending = await alice.call_tool("demo.clear_notes", {})
            assert code_of(pending) == "APPROVAL_REQUIRED"
            approval_id = (pending.meta or {})["dev.toolkeeper/approval-id"]
            async with open_store(f"sqlite:///{tmp_path}/ledger.db") as store:
                await Approvals(lambda: store).approve(approval_id, by="ops")
            done = await alice.call_tool("demo.clear_notes", {})
    assert not done.is_error, done
    assert [r.status for r in await calls_in(tmp_path)] == [CallStatus.SUCCEEDED]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_elicitation_over_stdio_asks_the_user_and_the_call_runs(
    config_file: Path, tmp_path: Path, mode: Literal["auto", "legacy"]
) -> None:
    asked: list[str] = []
    params = stdio_server(config_file)
    with anyio.fail_after(60):
        async with Client(params, elicitation_callback=answering(True, asked), mode=mode) as alice:
            result = await alice.call_tool("demo.clear_notes", {})
    assert not result.is_error, result
    assert len(asked) == 1 and "demo.clear_notes" in asked[0]
    [record] = await calls_in(tmp_path)
    assert record.status is CallStatus.SUCCEEDED and record.approval_id is not None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_stdio_client_cannot_approve_its_own_call_by_default(
    tmp_path: Path, mode: Literal["auto", "legacy"]
) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text(config_text(tmp_path, stdio_principal="dave"))
    asked: list[str] = []
    with anyio.fail_after(60):
        async with Client(
            stdio_server(config), elicitation_callback=answering(True, asked), mode=mode
        ) as dave:
            result = await dave.call_tool("demo.clear_notes", {})
    assert code_of(result) == "APPROVAL_REQUIRED"
    assert asked == []
    [record] = await calls_in(tmp_path)
    assert record.status is CallStatus.AWAITING_APPROVAL


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_stdio_client_naming_its_task_unallowed_is_refused(
    tmp_path: Path, mode: Literal["auto", "legacy"]
) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text(config_text(tmp_path, stdio_principal="bob"))
    with anyio.fail_after(60):
        async with Client(stdio_server(config), mode=mode) as bob:
            named = await bob.call_tool(
                "demo.list_notes", {}, meta={"dev.toolkeeper/task-id": "mine"}
            )
            plain = await bob.call_tool("demo.list_notes", {})
    assert code_of(named) == "PERMISSION_DENIED"
    assert code_of(plain) is None
    assert [r.task_id for r in await calls_in(tmp_path)] == ["mcp:bob"]


async def test_concurrent_calls_each_get_their_answer(config_file: Path, tmp_path: Path) -> None:
    # Many calls in flight at once, through the gateway's own path and the upstream lane:
    # every answer must reach the request it belongs to.
    answers: dict[int, Any] = {}
    with anyio.fail_after(60):
        async with Client(stdio_server(config_file)) as alice:

            async def one(i: int) -> None:
                result = await alice.call_tool("t.echo", {"text": f"call {i}"})
                answers[i] = (result.structured_content or {}).get("text")

            async with anyio.create_task_group() as tg:
                for i in range(24):
                    tg.start_soon(one, i)
    assert answers == {i: f"call {i}" for i in range(24)}
    records = await calls_in(tmp_path)
    assert len(records) == 24 and {r.status for r in records} == {CallStatus.SUCCEEDED}


class RawSession:
    """JSON-RPC lines to and from a `toolkeeper serve --stdio` process."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin, self._stdout = process.stdin, process.stdout
        self._buffer = b""
        self.answers: dict[Any, dict[str, Any]] = {}

    async def send(self, message: dict[str, Any]) -> None:
        await self._stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def answer(self, request_id: Any) -> dict[str, Any]:
        while request_id not in self.answers:
            self._buffer += await self._stdout.receive()
            *complete, self._buffer = self._buffer.split(b"\n")
            for raw in complete:
                message = json.loads(raw)
                if "id" in message:
                    self.answers[message["id"]] = message
        return self.answers[request_id]

    async def call(self, request_id: Any, name: str, arguments: Any, **meta: Any) -> None:
        params = {"name": name, "arguments": arguments, "_meta": meta}
        await self.send({"id": request_id, "method": "tools/call", "params": params})


@asynccontextmanager
async def raw_gateway(config: Path) -> AsyncIterator[RawSession]:
    params = stdio_server(config)
    async with await anyio.open_process(
        [params.command, *params.args],
        env={**os.environ, **(params.env or {})},
        stderr=subprocess.DEVNULL,
    ) as process:
        yield RawSession(process)
        assert process.stdin is not None
        await process.stdin.aclose()
        await process.wait()


@asynccontextmanager
async def modern_gateway(config: Path) -> AsyncIterator[RawSession]:
    """`raw_gateway` past the 2026-07-28 `server/discover` (request id 1)."""
    async with raw_gateway(config) as gw:
        await gw.send({"id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}})
        await gw.answer(1)
        yield gw


async def test_modern_calls_get_the_sdks_wire_shape_errors_and_cancellation(
    config_file: Path, tmp_path: Path
) -> None:
    with anyio.fail_after(60):
        async with modern_gateway(config_file) as gw:
            await gw.call(2, "t.hang", {}, **ENVELOPE)
            await gw.call(3, "t.echo", {"text": "hi"}, **ENVELOPE)
            echoed = await gw.answer(3)
            await gw.call(4, "t.nope", {}, **ENVELOPE)
            await gw.call(5, "t.echo", "not an object", **ENVELOPE)
            # Ids that are not JSON-RPC ids are the SDK's to refuse; the session goes on.
            body = {"name": "t.echo", "arguments": {"text": "odd id"}, "_meta": ENVELOPE}
            await gw.send({"id": [7], "method": "tools/call", "params": body})
            await gw.send({"method": "notifications/cancelled", "params": {"requestId": [2]}})
            await gw.send({"method": "notifications/cancelled", "params": {"requestId": 2}})
            await gw.call(6, "t.echo", {"text": "after"}, **ENVELOPE)
            unknown, malformed, after = await gw.answer(4), await gw.answer(5), await gw.answer(6)
            answered = set(gw.answers)
            # Cancelled, not merely cut short when the gateway stops: read while it runs.
            statuses = {r.tool: r.status for r in await calls_in(tmp_path)}
    result = echoed["result"]
    methods.validate_server_result("tools/call", MODERN, result)
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "toolkeeper"
    assert result["structuredContent"]["text"] == "hi"
    assert unknown["error"] == {"code": -32602, "message": "Unknown tool: t.nope"}
    assert malformed["error"]["code"] == -32602
    assert after["result"]["structuredContent"]["text"] == "after"
    assert 2 not in answered  # a cancelled request is not answered
    assert statuses["t.hang"] is CallStatus.CANCELLED


async def test_handshake_era_calls_get_the_sdks_wire_shape(tmp_path: Path) -> None:
    config = tmp_path / "bob.toml"
    config.write_text(config_text(tmp_path, stdio_principal="bob"))
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    with anyio.fail_after(60):
        async with raw_gateway(config) as gw:
            await gw.send({"id": 1, "method": "initialize", "params": init})
            await gw.answer(1)
            await gw.send({"method": "notifications/initialized"})
            await gw.call(2, "demo.list_notes", {})
            await gw.call(3, "t.echo", {"text": "not granted"})
            listed, refused = await gw.answer(2), await gw.answer(3)
    result = listed["result"]
    methods.validate_server_result("tools/call", "2025-06-18", result)
    assert "resultType" not in result  # (and no serverInfo stamp: only the gateway's own keys)
    assert set(result["_meta"]) == {"dev.toolkeeper/call-id", "dev.toolkeeper/replayed"}
    assert refused["error"]["message"] == "Unknown tool: t.echo"


async def test_arguments_with_a_lone_surrogate_are_answered_not_dropped(
    config_file: Path, tmp_path: Path
) -> None:
    # Valid JSON that the SDK's parser refuses: the SDK drops such a request unanswered.
    with anyio.fail_after(60):
        async with modern_gateway(config_file) as gw:
            await gw.call(2, "t.echo", {"text": "cut \ud83d"}, **ENVELOPE)
            refused = await gw.answer(2)
            await gw.call(3, "t.echo", {"text": "after"}, **ENVELOPE)
            after = await gw.answer(3)
            records = {r.call_id: r.status for r in await calls_in(tmp_path)}
    meta = refused["result"]["_meta"]
    assert refused["result"]["isError"] is True
    assert meta["dev.toolkeeper/error-code"] == "INVALID_ARGUMENTS"
    assert records[meta["dev.toolkeeper/call-id"]] is CallStatus.REJECTED
    assert after["result"]["structuredContent"]["text"] == "after"


async def test_a_line_nested_too_deep_is_refused_and_the_session_goes_on(
    config_file: Path,
) -> None:
    with anyio.fail_after(60):
        async with modern_gateway(config_file) as gw:
            # 3,000 levels: msgspec gives up at 1,000 with RecursionError, which ended the gateway
            line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call"})[:-1]
            args = "[" * 3000 + "]" * 3000
            body = f', "params": {{"name": "t.echo", "arguments": {{"x": {args}}}}}}}\n'
            await gw._stdin.send((line + body).encode())
            await gw.call(3, "t.echo", {"text": "after"}, **ENVELOPE)
            after = await gw.answer(3)
    assert after["result"]["structuredContent"]["text"] == "after"


async def test_a_non_sdk_upstreams_text_results_and_rewritten_names_are_served(
    tmp_path: Path,
) -> None:
    # Sent as structuredContent, the text made the SDK answer -32603 for a call the ledger
    # holds SUCCEEDED: the client's retry then ran the write a second time.
    raw = Path(__file__).parent.parent / "connectors" / "raw_upstream.py"
    config = tmp_path / "raw.toml"
    config.write_text(
        f"""
[server]
ledger = "sqlite:///{tmp_path}/ledger.db"
stdio_principal = "alice"

[upstreams.raw]
command = "{sys.executable}"
args = ["{raw}"]
protocol = "legacy"
trust_hints = true

[principals.alice]
token = "alice-token-0123456789"
grants = ["raw:*"]
"""
    )
    effects = tmp_path / "effects.txt"
    with anyio.fail_after(60):
        async with modern_gateway(config) as gw:
            await gw.call(2, "raw.report", {"path": str(effects)}, **ENVELOPE)
            answered = await gw.answer(2)
            await gw.send({"id": 3, "method": "tools/list", "params": {"_meta": ENVELOPE}})
            listed = {t["name"] for t in (await gw.answer(3))["result"]["tools"]}
            await gw.call(4, "raw.odd_name", {}, **ENVELOPE)
            odd = await gw.answer(4)
            records = await calls_in(tmp_path)
    result = answered["result"]
    # Text where an object is declared: sent as a success, the official client raises on it
    # (no structured content); as an error result, it says the call took effect.
    assert result["isError"] is True and "structuredContent" not in result
    assert result["_meta"]["dev.toolkeeper/error-code"] == "TOOL_ERROR"
    assert "took effect" in result["content"][0]["text"]
    assert effects.read_text() == "called\n"
    # A name MCP does not allow is listed rewritten, and that name is the one that works.
    assert "raw.odd_name" in listed and "raw.odd name" not in listed
    assert odd["result"]["content"][1]["text"].splitlines()[1] == "odd"  # (fenced)
    assert {r.tool: r.status for r in records} == {
        "raw.report": CallStatus.SUCCEEDED,
        "raw.odd name": CallStatus.SUCCEEDED,
    }


async def test_sigterm_stops_the_stdio_gateway_with_calls_in_flight_recorded(
    config_file: Path, tmp_path: Path
) -> None:
    params = stdio_server(config_file)
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [params.command, *params.args],
            env={**os.environ, **(params.env or {})},
            stderr=subprocess.PIPE,
        ) as process:
            gw = RawSession(process)
            await gw.send({"id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}})
            await gw.answer(1)
            await gw.call(2, "t.hang", {}, **ENVELOPE)
            await gw.call(3, "t.echo", {"text": "hi"}, **ENVELOPE)
            await gw.answer(3)
            process.send_signal(signal.SIGTERM)
            code = await process.wait()
            assert process.stderr is not None
            errors = b"".join([chunk async for chunk in process.stderr]).decode()
    assert code == 0, errors
    assert "Traceback" not in errors
    statuses = {r.tool: r.status for r in await calls_in(tmp_path)}
    assert statuses == {"t.echo": CallStatus.SUCCEEDED, "t.hang": CallStatus.CANCELLED}


async def test_an_oversized_call_proposed_twice_over_stdio_is_refused_twice_at_once(
    config_file: Path, tmp_path: Path
) -> None:
    """The gateway derives the same call id for the same call: the second proposal spun the
    gateway's event loop at 100% CPU for ever (no other request, nor SIGTERM, was served)."""
    text = "x" * ((1 << 20) + 10)
    with anyio.fail_after(60):
        async with Client(stdio_server(config_file)) as alice:
            for _ in range(2):
                with anyio.fail_after(20):  # (for ever, not a busy machine)
                    result = await alice.call_tool("t.echo", {"text": text})
                assert result.is_error and code_of(result) == "PAYLOAD_TOO_LARGE"
            after = await alice.call_tool("t.echo", {"text": "still serving"})
    assert not after.is_error
    assert {r.status for r in await calls_in(tmp_path)} == {
        CallStatus.REJECTED,
        CallStatus.SUCCEEDED,
    }
