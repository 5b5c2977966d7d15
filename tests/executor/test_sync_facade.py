"""Scripts without an event loop use the sync facade."""

from pathlib import Path

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
