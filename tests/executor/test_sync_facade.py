"""Scripts without an event loop use the sync facade."""

from pathlib import Path

import anyio
import pytest

from toolkeeper import Keeper, ToolCall


def test_execute_sync_runs_and_records(tmp_path: Path) -> None:
    keeper = Keeper(ledger=f"sqlite:///{tmp_path / 'l.db'}")

    @keeper.tool(effect="read_only")
    def shout(text: str) -> str:
        return text.upper()

    try:
        first = keeper.execute_sync(
            ToolCall(call_id="c1", name="shout", arguments='{"text": "hi"}')
        )
        again = keeper.execute_sync(
            ToolCall(call_id="c1", name="shout", arguments='{"text": "hi"}')
        )
    finally:
        keeper.close_sync()
        keeper.close_sync()
    assert first.data == "HI"
    assert again.replayed


def test_execute_sync_inside_an_event_loop_is_refused_not_a_deadlock() -> None:
    keeper = Keeper(ledger="memory://")

    @keeper.tool(effect="read_only")
    def shout(text: str) -> str:
        return text.upper()

    async def inside() -> None:
        async with keeper:
            with pytest.raises(RuntimeError, match=r"await keeper\.execute\(call\)"):
                keeper.execute_sync(ToolCall(call_id="c1", name="shout", arguments={"text": "a"}))
            result = await keeper.execute(
                ToolCall(call_id="c1", name="shout", arguments={"text": "a"})
            )
            assert result.data == "A" and not result.replayed

    anyio.run(inside)
