"""The `Keeper` facade: its lifecycle around the calls it runs."""

from pathlib import Path

import anyio
import pytest

from toolkeeper import CallStatus, Keeper, ToolCall, ToolResult
from toolkeeper.core.errors import ConfigurationError

pytestmark = pytest.mark.anyio


async def test_closing_a_keeper_waits_for_its_calls_in_flight_to_be_recorded(
    tmp_path: Path,
) -> None:
    """Closed under them, the calls whose tools had run came back INTERNAL_ERROR and stayed
    RUNNING in the ledger."""
    db = f"sqlite:///{tmp_path / 'k.db'}"
    keeper = Keeper(ledger=db)
    started, release = anyio.Event(), anyio.Event()

    @keeper.tool(effect="write")
    async def ship(order_id: str) -> str:
        started.set()
        await release.wait()
        return f"shipped {order_id}"

    results: list[object] = []

    async def ship_one() -> None:
        results.append(
            await keeper.execute(ToolCall(call_id="c1", name="ship", arguments={"order_id": "A"}))
        )

    with anyio.fail_after(5):
        await keeper.open()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ship_one)
            await started.wait()
            tg.start_soon(keeper.aclose)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ConfigurationError):  # closing: no new call starts
                await keeper.execute(ToolCall(call_id="c2", name="ship", arguments={}))
            release.set()
    [result] = results
    assert isinstance(result, ToolResult) and result.status is CallStatus.SUCCEEDED
    async with Keeper(ledger=db) as again:
        record = await again.store.get_call("default", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED
