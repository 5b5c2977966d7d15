"""The contract of `LedgerStore.page_calls`, mixed into each backend's contract suite."""

from __future__ import annotations

import pytest

from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import LedgerStore
from toolkeeper.ledger.pages import CallCursor, CallQuery

from .records import call

S = CallStatus


async def _fill(store: LedgerStore) -> list[str]:
    """Six calls, two tools, two principals, three tasks; their ids, oldest first."""
    ids = []
    for n in range(6):
        record = call(
            f"c{n}",
            task_id=f"t{n % 3}",
            tool="a.read" if n % 2 else "b.write",
            principal_id="alice" if n < 3 else "bob",
        )
        await store.claim_call(record)
        ids.append(record.call_id)
    await store.transition("t1", "c4", expected=S.RUNNING, target=S.SUCCEEDED)
    return ids


@pytest.mark.anyio
class PagesContract:
    async def test_a_page_lists_the_newest_calls_first(self, store: LedgerStore) -> None:
        ids = await _fill(store)
        page = await store.page_calls(CallQuery(limit=4))
        assert [r.call_id for r in page] == ids[::-1][:4]

    async def test_the_next_page_starts_after_the_cursor_even_when_calls_were_added(
        self, store: LedgerStore
    ) -> None:
        ids = await _fill(store)
        first = await store.page_calls(CallQuery(limit=4))
        await store.claim_call(call("late", task_id="t9"))
        cursor = CallCursor.decode(CallCursor.of(first[-1]).encode())
        rest = await store.page_calls(CallQuery(limit=4, after=cursor))
        assert [r.call_id for r in first + rest] == ids[::-1]

    async def test_paging_to_the_end_lists_every_call_once(self, store: LedgerStore) -> None:
        ids = await _fill(store)
        seen: list[str] = []
        cursor = None
        while page := await store.page_calls(CallQuery(limit=4, after=cursor)):
            seen.extend(r.call_id for r in page)
            cursor = CallCursor.of(page[-1])
        assert seen == ids[::-1]

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            (CallQuery(tool="a.read"), ["c5", "c3", "c1"]),
            (CallQuery(principal_id="bob"), ["c5", "c4", "c3"]),
            (CallQuery(status=S.SUCCEEDED), ["c4"]),
            (CallQuery(task_id="t0"), ["c3", "c0"]),
            (CallQuery(call_id="c2"), ["c2"]),
            (CallQuery(tool="a.read", principal_id="alice"), ["c1"]),
        ],
    )
    async def test_each_filter_keeps_only_its_calls(
        self, store: LedgerStore, query: CallQuery, expected: list[str]
    ) -> None:
        await _fill(store)
        assert [r.call_id for r in await store.page_calls(query)] == expected

    async def test_since_and_before_bound_the_creation_time(self, store: LedgerStore) -> None:
        await _fill(store)
        every = await store.page_calls(CallQuery())
        middle = every[2].created_at
        newer = await store.page_calls(CallQuery(since=middle))
        older = await store.page_calls(CallQuery(before=middle))
        assert {r.call_id for r in newer} | {r.call_id for r in older} == {r.call_id for r in every}
        assert all(r.created_at >= middle for r in newer)
        assert all(r.created_at < middle for r in older)
