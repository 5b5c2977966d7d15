"""Derived call ids: the same proposal is the same call until it ends, then a new one."""

from __future__ import annotations

import pytest

from toolkeeper.core import CallStatus, Principal
from toolkeeper.ledger.base import CallRecord
from toolkeeper.ledger.memory import MemoryStore
from toolkeeper.server.call_ids import CALL_META_KEY, TASK_META_KEY, CallIds

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
