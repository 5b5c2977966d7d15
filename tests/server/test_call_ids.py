"""Derived call ids: the same proposal is the same call until it ends, then a new one."""

from __future__ import annotations

import pytest

from toolkeeper.core import CallStatus, Principal
from toolkeeper.ledger.base import CallRecord
from toolkeeper.ledger.memory import MemoryStore
from toolkeeper.server.call_ids import CALL_META_KEY, TASK_META_KEY, CallIds
from toolkeeper.testing import FakeClock

pytestmark = pytest.mark.anyio

ALICE = Principal(id="alice")


def record(call_id: str, status: CallStatus) -> CallRecord:
    return CallRecord(
        task_id="mcp:alice",
        call_id=call_id,
        tool="t.x",
        version="1",
        digest="d",
        arguments={},
        principal_id="alice",
        tenant="default",
        status=status,
        effect="write",
        idempotent=False,
        idempotency_key="k",
    )


async def test_a_proposal_waiting_for_approval_keeps_its_id_and_an_ended_one_does_not() -> None:
    store = MemoryStore()
    ids = CallIds(store)
    task = ids.task_id(ALICE, None)
    first = await ids.call_id(ALICE, task, "t.x", {"a": 1}, None)
    await store.claim_call(record(first, CallStatus.AWAITING_APPROVAL))
    assert await ids.call_id(ALICE, task, "t.x", {"a": 1}, None) == first
    await store.transition(
        task, first, expected=CallStatus.AWAITING_APPROVAL, target=CallStatus.SUCCEEDED
    )
    second = await ids.call_id(ALICE, task, "t.x", {"a": 1}, None)
    assert second == f"{first}.1"
    assert await ids.call_id(ALICE, task, "t.x", {"a": 2}, None) != first


async def test_ids_differ_by_principal_and_tool() -> None:
    ids = CallIds(MemoryStore())
    bob = Principal(id="bob")
    a = await ids.call_id(ALICE, "t", "t.x", {}, None)
    assert a != await ids.call_id(bob, "t", "t.x", {}, None)
    assert a != await ids.call_id(ALICE, "t", "t.y", {}, None)


async def test_an_ended_call_is_remembered_so_the_next_id_needs_no_lookup() -> None:
    store = MemoryStore()
    ids = CallIds(store)
    first = await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None)
    await store.claim_call(record(first, CallStatus.SUCCEEDED))
    ids.ended("mcp:alice", first, CallStatus.SUCCEEDED)
    assert await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None) == f"{first}.1"


async def test_the_client_may_name_task_and_call_in_meta() -> None:
    ids = CallIds(MemoryStore())
    meta = {TASK_META_KEY: "run-7", CALL_META_KEY: "c-1"}
    task = ids.task_id(ALICE, meta)
    assert task == "mcp:alice:run-7"
    assert await ids.call_id(ALICE, task, "t.x", {}, meta) == "c-1"
    assert not CallIds.derived(meta)


def test_no_two_principals_share_a_task() -> None:
    # "a" naming task "b" and "a:b" naming none both had the task "mcp:a:b", and its budgets.
    tasks = {
        CallIds.task_id(Principal(id="a"), {TASK_META_KEY: "b"}),
        CallIds.task_id(Principal(id="a:b"), None),
        CallIds.task_id(Principal(id="a%3Ab"), None),
    }
    assert len(tasks) == 3
    assert CallIds.task_id(ALICE, None) == "mcp:alice"  # (ids without a colon keep theirs)


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        self.lookups += 1
        return await super().get_call(task_id, call_id)


async def test_a_call_made_many_times_is_found_again_in_a_few_lookups_after_a_restart() -> None:
    store = CountingStore()
    ids = CallIds(store)
    task = ids.task_id(ALICE, None)
    for _ in range(300):  # a read repeated: each repeat a new call of the next generation
        call_id = await ids.call_id(ALICE, task, "t.x", {"a": 1}, None)
        await store.claim_call(record(call_id, CallStatus.SUCCEEDED))
        ids.ended(task, call_id, CallStatus.SUCCEEDED)
    restarted = CallIds(store)  # a new process: nothing remembered
    store.lookups = 0
    again = await restarted.call_id(ALICE, task, "t.x", {"a": 1}, None)
    assert again == f"{call_id.partition('.')[0]}.300"
    assert store.lookups <= 20  # not one per earlier generation (301)


async def test_what_is_remembered_of_derived_calls_stays_bounded() -> None:
    from toolkeeper.server import call_ids

    store = MemoryStore()
    ids = CallIds(store)
    task = ids.task_id(ALICE, None)
    for i in range(call_ids._REMEMBERED + 500):
        call_id = await ids.call_id(ALICE, task, "t.x", {"i": i}, None)
        ids.ended(task, call_id, CallStatus.SUCCEEDED)
    assert len(ids._known) == call_ids._REMEMBERED


async def test_a_call_of_unknown_outcome_keeps_its_id_until_settled() -> None:
    store = MemoryStore()
    ids = CallIds(store)
    first = await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None)
    await store.claim_call(record(first, CallStatus.RUNNING))
    await store.transition(
        "mcp:alice", first, expected=CallStatus.RUNNING, target=CallStatus.UNKNOWN_OUTCOME
    )
    ids.ended("mcp:alice", first, CallStatus.UNKNOWN_OUTCOME)
    assert await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None) == first
    assert await CallIds(store).call_id(ALICE, "mcp:alice", "t.x", {}, None) == first


@pytest.mark.parametrize("succeeded", [True, False])
async def test_a_settled_call_is_answered_once_if_done_and_is_a_new_call_if_not(
    succeeded: bool,
) -> None:
    store = MemoryStore()
    ids = CallIds(store, repeat_window=0)
    first = await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None)
    await store.claim_call(record(first, CallStatus.UNKNOWN_OUTCOME))
    target = CallStatus.SUCCEEDED if succeeded else CallStatus.FAILED
    await store.transition("mcp:alice", first, expected=CallStatus.UNKNOWN_OUTCOME, target=target)
    again = await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None, probe=True)
    assert again == (first if succeeded else f"{first}.1")
    ids.ended("mcp:alice", again, target)  # answered: what was found, or the new call's end
    assert await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None, probe=True) != first


async def test_a_settled_call_followed_by_later_ones_is_not_taken_for_the_latest() -> None:
    store = MemoryStore()
    ids = CallIds(store, repeat_window=0)
    task = "mcp:alice"
    first = await ids.call_id(ALICE, task, "t.x", {}, None)
    await store.claim_call(record(first, CallStatus.UNKNOWN_OUTCOME))
    await store.transition(
        task, first, expected=CallStatus.UNKNOWN_OUTCOME, target=CallStatus.SUCCEEDED
    )
    ids.ended(task, first, CallStatus.SUCCEEDED)
    for _ in range(3):
        call_id = await ids.call_id(ALICE, task, "t.x", {}, None, probe=True)
        await store.claim_call(record(call_id, CallStatus.SUCCEEDED))
        ids.ended(task, call_id, CallStatus.SUCCEEDED)
    assert await CallIds(store).call_id(ALICE, task, "t.x", {}, None) == f"{first}.4"


async def test_a_write_that_just_ended_is_joined_for_the_repeat_window_then_made_anew() -> None:
    """Identical proposals raced from several connections reach the gateway spread over
    milliseconds: those after a fast write ended ran it again, a retry the client could not
    tell from a repeat. For the repeat window a write's proposal joins the call that ended."""
    store = MemoryStore()
    clock = FakeClock()
    ids = CallIds(store, clock=clock, repeat_window=5)
    task = "mcp:alice"
    first = await ids.call_id(ALICE, task, "t.x", {}, None, probe=True)
    await store.claim_call(record(first, CallStatus.SUCCEEDED))
    ids.ended(task, first, CallStatus.SUCCEEDED)
    ended = await store.get_call(task, first)
    assert ended is not None
    clock.now = ended.updated_at + 4.9
    assert await ids.call_id(ALICE, task, "t.x", {}, None, probe=True) == first
    assert await CallIds(store, clock=clock).call_id(ALICE, task, "t.x", {}, None, probe=True) == (
        first
    )
    # A read (no probe) is a new call as soon as it ended, as is a write past the window.
    assert await ids.call_id(ALICE, task, "t.x", {}, None) == f"{first}.1"
    clock.now = ended.updated_at + 5
    assert await ids.call_id(ALICE, task, "t.x", {}, None, probe=True) == f"{first}.1"


async def _settled(target: CallStatus) -> tuple[CallIds, FakeClock, str, float]:
    """Ids with a 5 s repeat window over a write of unknown outcome settled as `target`: the
    ids, their clock, the call's id and when it was settled."""
    store = MemoryStore()
    clock = FakeClock()
    ids = CallIds(store, clock=clock, repeat_window=5)
    first = await ids.call_id(ALICE, "mcp:alice", "t.x", {}, None, probe=True)
    await store.claim_call(record(first, CallStatus.UNKNOWN_OUTCOME))
    await store.transition("mcp:alice", first, expected=CallStatus.UNKNOWN_OUTCOME, target=target)
    settled = await store.get_call("mcp:alice", first)
    assert settled is not None
    return ids, clock, first, settled.updated_at


async def test_a_write_settled_after_an_unknown_outcome_is_not_joined_by_the_window() -> None:
    ids, clock, first, settled_at = await _settled(CallStatus.FAILED)
    task = "mcp:alice"
    clock.now = settled_at + 1
    assert await ids.call_id(ALICE, task, "t.x", {}, None, probe=True) == f"{first}.1"


async def test_a_settled_success_answered_here_is_joined_for_the_window_of_that_answer() -> None:
    """Settled as done long ago, the call was answered once, and an identical proposal racing
    that answer ran the write again (1 replay and 1 run of 5 at once, in an audit)."""
    ids, clock, first, settled_at = await _settled(CallStatus.SUCCEEDED)
    task = "mcp:alice"
    clock.now = settled_at + 3600  # settled an hour before the client came back
    assert await ids.call_id(ALICE, task, "t.x", {}, None, probe=True) == first
    ids.ended(task, first, CallStatus.SUCCEEDED)  # answered with what was found
    clock.advance(4.9)
    assert await ids.call_id(ALICE, task, "t.x", {}, None, probe=True) == first
    clock.advance(0.2)
    assert await ids.call_id(ALICE, task, "t.x", {}, None, probe=True) == f"{first}.1"
