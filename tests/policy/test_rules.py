from pathlib import Path

import pytest

from toolkeeper import (
    CallStatus,
    ErrorCode,
    Keeper,
    ToolCall,
    at_most,
    deny,
    domain_in,
    path_inside,
)
from toolkeeper.testing import MemoryStore

pytestmark = pytest.mark.anyio


async def test_business_rules_guard_arguments(tmp_path: Path) -> None:
    keeper = Keeper(ledger=MemoryStore())
    done: list[str] = []

    @keeper.tool(
        effect="write",
        rules=[
            path_inside("path", tmp_path),
            domain_in("url", ["example.org"]),
            at_most("amount", 100, approve_above=True),
        ],
    )
    async def act(path: str, url: str, amount: int) -> str:
        done.append(path)
        return "ok"

    async def run(call_id: str, **args: object) -> object:
        return await keeper.execute(ToolCall(call_id=call_id, name="act", arguments=args))

    async with keeper:
        ok = await run("1", path="a.txt", url="https://docs.example.org/x", amount=5)
        escape = await run("2", path="../x", url="https://example.org", amount=5)
        link = await run("3", path="a", url="https://example.org.evil.com/", amount=5)
        big = await run("4", path="a", url="https://example.org", amount=500)
    assert ok.status is CallStatus.SUCCEEDED  # type: ignore[attr-defined]
    assert escape.error.code is ErrorCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert escape.error.details["violations"][0]["pointer"] == "/path"  # type: ignore[attr-defined]
    assert link.error.code is ErrorCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert big.status is CallStatus.AWAITING_APPROVAL  # type: ignore[attr-defined]
    assert done == ["a.txt"]


async def test_global_rules_run_after_tool_rules() -> None:
    seen: list[str] = []

    def no_weekend(inp: object) -> object:
        seen.append("global")
        return deny("not on weekends")

    keeper = Keeper(ledger=MemoryStore(), rules=[no_weekend])

    @keeper.tool(effect="read_only", rules=[lambda inp: seen.append("tool")])
    async def ping() -> str:
        return "pong"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="1", name="ping"))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert seen == ["tool", "global"]


async def test_a_broken_rule_fails_closed_without_leaking() -> None:
    ran: list[str] = []

    def broken(inp: object) -> object:
        raise KeyError("internal/secret/path")

    keeper = Keeper(ledger=MemoryStore())

    @keeper.tool(effect="read_only", rules=[broken])
    async def ping() -> str:
        ran.append("ping")
        return "pong"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="1", name="ping"))
        record = await keeper.store.get_call("default", "1")
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert "secret" not in result.error.message
    assert record is not None and record.status is CallStatus.REJECTED
    assert ran == []
