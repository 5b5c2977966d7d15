"""One audit event per persisted state change; sensitive arguments never stored in the clear."""

import json
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from toolkeeper import Keeper, ToolCall
from toolkeeper.observe.audit import JsonlAuditSink
from toolkeeper.observe.redact import REDACTED, redact, sensitive_pointers
from toolkeeper.testing import MemoryAuditSink, MemoryStore

pytestmark = pytest.mark.anyio


async def test_secrets_are_redacted_in_ledger_and_audit(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    keeper = Keeper(ledger=f"sqlite:///{tmp_path / 'l.db'}", audit=sink)
    seen: list[str] = []

    @keeper.tool(effect="write")
    async def login(
        user: str,
        password: Annotated[str, Field(json_schema_extra={"writeOnly": True})],
        token: Annotated[str, Field(json_schema_extra={"x-sensitive": True})] = "t0",
    ) -> str:
        seen.append(password)
        return "ok"

    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="login", arguments={"user": "ann", "password": "hunter2"})
        )
        record = await keeper.store.get_call("default", "c1")
    assert result.ok and seen == ["hunter2"]
    assert record is not None
    assert record.arguments == {"user": "ann", "password": REDACTED, "token": REDACTED}
    text = (tmp_path / "audit.jsonl").read_text()
    assert "hunter2" not in text and "t0" not in text
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["status"] for e in events] == ["RUNNING", "SUCCEEDED"]
    assert events[1]["previous"] == "RUNNING"


async def test_refusals_are_audited_with_their_code() -> None:
    sink = MemoryAuditSink()
    keeper = Keeper(ledger=MemoryStore(), audit=sink)
    async with keeper:
        await keeper.execute(ToolCall(call_id="c1", name="nope"))
    [event] = sink.events
    assert (event.status, event.error_code) == ("REJECTED", "UNKNOWN_TOOL")


def test_sensitive_pointers_follow_refs_and_nesting() -> None:
    schema = {
        "type": "object",
        "properties": {
            "auth": {"$ref": "#/$defs/Auth"},
            "note": {"type": "string"},
        },
        "$defs": {
            "Auth": {"type": "object", "properties": {"key": {"type": "string", "writeOnly": True}}}
        },
    }
    pointers = sensitive_pointers(schema)
    assert pointers == {"/auth/key"}
    assert redact({"auth": {"key": "k"}, "note": "n"}, pointers) == {
        "auth": {"key": REDACTED},
        "note": "n",
    }
