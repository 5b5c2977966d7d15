"""The part of the ledger contract about pinned tool definitions (`ledger.pins`), which every
store keeps: `LedgerContract` runs it against each backend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio
import pytest

from toolkeeper.ledger.pins import PinRecord, PinStatus

Connect = Callable[[], Awaitable[Any]]

DEFINITION = {
    "name": "notes.add",
    "title": None,
    "description": "Adds a note. Ünïcödé and \u200b kept as written",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "output_schema": None,
}


def pin(name: str = "notes.add", **changes: Any) -> PinRecord:
    record = PinRecord(
        name=name,
        source="notes",
        status=PinStatus.PINNED,
        digest="d1",
        definition=DEFINITION,
        findings=({"kind": "invisible-characters", "where": "/description", "excerpt": "x"},),
        created_at=100.0,
        updated_at=100.0,
        history=({"at": 100.0, "event": "pinned", "digest": "d1"},),
    )
    return replace(record, **changes)


@pytest.mark.anyio
class PinContract:
    async def test_a_pin_reads_back_as_written(self, connect: Connect) -> None:
        store = await connect()
        assert await store.put_pin(pin(), expected_rev=None)
        assert await store.get_pin("notes.add") == pin()
        assert await store.get_pin("notes.other") is None

    async def test_a_tool_is_pinned_once(self, connect: Connect) -> None:
        store = await connect()
        assert await store.put_pin(pin(), expected_rev=None)
        assert not await store.put_pin(pin(digest="d2"), expected_rev=None)
        assert (await store.get_pin("notes.add")).digest == "d1"

    async def test_a_change_is_written_only_over_the_revision_it_read(
        self, connect: Connect
    ) -> None:
        store = await connect()
        await store.put_pin(pin(), expected_rev=None)
        held = pin(status=PinStatus.PENDING, offered_digest="d2", offered={"a": 1}, rev=2)
        assert await store.put_pin(held, expected_rev=1)
        assert not await store.put_pin(replace(held, offered_digest="d3", rev=2), expected_rev=1)
        assert not await store.put_pin(pin("notes.gone", rev=2), expected_rev=1)
        assert await store.get_pin("notes.add") == held

    async def test_of_concurrent_changes_of_one_revision_one_is_written(
        self, connect: Connect
    ) -> None:
        stores = [await connect() for _ in range(6)]
        await stores[0].put_pin(pin(), expected_rev=None)
        won: list[int] = []

        async def change(i: int) -> None:
            record = pin(status=PinStatus.PENDING, offered_digest=f"d{i}", rev=2)
            if await stores[i].put_pin(record, expected_rev=1):
                won.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(len(stores)):
                tg.start_soon(change, i)
        assert len(won) == 1
        assert (await stores[0].get_pin("notes.add")).offered_digest == f"d{won[0]}"

    async def test_pins_are_listed_by_name_and_status(self, connect: Connect) -> None:
        store = await connect()
        for name, status in [("b.x", PinStatus.PENDING), ("a.x", PinStatus.PINNED)]:
            await store.put_pin(pin(name, status=status), expected_rev=None)
        await store.put_pin(pin("c.x", status=PinStatus.PENDING), expected_rev=None)
        assert [p.name for p in await store.list_pins()] == ["a.x", "b.x", "c.x"]
        pending = await store.list_pins(status=PinStatus.PENDING, limit=1)
        assert [p.name for p in pending] == ["b.x"]
        with pytest.raises(ValueError, match="limit"):
            await store.list_pins(limit=-1)

    async def test_a_pin_is_seen_by_another_connection(self, connect: Connect) -> None:
        await (await connect()).put_pin(pin(), expected_rev=None)
        assert await (await connect()).get_pin("notes.add") == pin()
