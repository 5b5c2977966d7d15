"""A call id belongs to the principal that proposed it first, and to its arguments."""

from pathlib import Path

import anyio
import anyio.lowlevel
import msgspec
import pytest

from toolkeeper import CallStatus, ErrorCode, Keeper, Principal, ToolCall
from toolkeeper.ledger.base import LedgerStore
from toolkeeper.ledger.postgres import PostgresStore

from ..conftest import APP, postgres_url

pytestmark = pytest.mark.anyio

ALICE = Principal(id="alice", tenant="acme", grants=frozenset({"hr:read", "files:*"}))
MALLORY = Principal(id="mallory", tenant="evil", grants=frozenset({"hr:read", "files:*"}))


@pytest.fixture
async def hr(keeper: Keeper) -> Keeper:
    @keeper.tool(effect="read_only", permissions=["hr:read"])
    async def salary(employee: str) -> dict[str, object]:
        await anyio.lowlevel.checkpoint()  # lets concurrent proposals interleave
        return {"employee": employee, "salary": 250_000}

    @keeper.tool(effect="destructive", permissions=["files:delete"])
    async def delete(path: str) -> str:
        return path

    return keeper


async def test_another_principal_reusing_a_call_id_gets_a_conflict_not_the_result(
    hr: Keeper,
) -> None:
    call = ToolCall(call_id="call_1", name="salary", arguments={"employee": "bob"})
    first = await hr.execute(msgspec.structs.replace(call, principal=ALICE))
    reused = await hr.execute(msgspec.structs.replace(call, principal=MALLORY))
    assert first.status is CallStatus.SUCCEEDED
    assert reused.error is not None and reused.error.code is ErrorCode.CALL_ID_CONFLICT
    assert reused.data is None and not reused.replayed
    record = await hr.store.get_call("default", "call_1")
    assert record is not None and record.principal_id == "alice"
    assert record.status is CallStatus.SUCCEEDED


async def test_another_principal_cannot_disturb_an_approved_call(hr: Keeper) -> None:
    call = ToolCall(call_id="d1", name="delete", arguments={"path": "/tmp/x"})
    asked = await hr.execute(msgspec.structs.replace(call, principal=ALICE))
    assert asked.approval_id is not None
    await hr.approvals.approve(asked.approval_id, by="boss")
    meddled = await hr.execute(msgspec.structs.replace(call, principal=MALLORY))
    assert meddled.error is not None and meddled.error.code is ErrorCode.CALL_ID_CONFLICT
    ran = await hr.execute(msgspec.structs.replace(call, principal=ALICE))
    assert ran.status is CallStatus.SUCCEEDED and ran.approval_id == asked.approval_id


async def test_a_call_proposed_again_with_its_defaults_written_out_is_the_same_call(
    keeper: Keeper,
) -> None:
    # A call is its validated arguments with defaults applied (what an approval is bound to):
    # whether the model leaves a default out or writes it out, it is the same call.
    sent: list[str] = []

    @keeper.tool(effect="destructive")
    async def send(to: str, body: str, urgent: bool = False) -> str:
        sent.append(to)
        return f"sent to {to}"

    short = ToolCall(call_id="s1", name="send", arguments={"to": "bob", "body": "hi"})
    spelled = msgspec.structs.replace(short, arguments={"to": "bob", "body": "hi", "urgent": False})
    asked = await keeper.execute(short)
    assert asked.status is CallStatus.AWAITING_APPROVAL and asked.approval_id is not None
    again = await keeper.execute(spelled)
    assert again.status is CallStatus.AWAITING_APPROVAL
    assert again.approval_id == asked.approval_id
    await keeper.approvals.approve(asked.approval_id, by="boss")
    ran = await keeper.execute(spelled)
    assert ran.status is CallStatus.SUCCEEDED and ran.data == "sent to bob"
    for proposal in (short, spelled):
        replayed = await keeper.execute(proposal)
        assert replayed.replayed and replayed.data == "sent to bob"
    changed = await keeper.execute(
        msgspec.structs.replace(short, arguments={**spelled.arguments, "urgent": True})
    )
    assert changed.error is not None and changed.error.code is ErrorCode.CALL_ID_CONFLICT
    assert sent == ["bob"]


async def test_concurrent_proposals_of_one_call_id_with_other_arguments_conflict(
    hr: Keeper,
) -> None:
    results = await hr.execute_many(
        [
            ToolCall(call_id="same", name="salary", arguments={"employee": who}, principal=ALICE)
            for who in ("bob", "carol")
        ]
    )
    statuses = sorted(r.status for r in results)
    assert statuses == [CallStatus.REJECTED, CallStatus.SUCCEEDED]
    [refused] = [r for r in results if r.status is CallStatus.REJECTED]
    [answered] = [r for r in results if r.status is CallStatus.SUCCEEDED]
    assert refused.error is not None and refused.error.code is ErrorCode.CALL_ID_CONFLICT
    record = await hr.store.get_call("default", "same")
    assert record is not None and record.result == answered.data


@pytest.mark.parametrize(
    ("call_id", "task_id", "problem"),
    [
        ("", "t", "call id is empty"),
        ("a\x00b", "t", "call id holds a NUL character"),
        ("\ud800", "t", "call id holds a lone UTF-16 surrogate"),
        ("ok", "t\x00", "task id holds a NUL character"),
        ("x" * 513, "t", "call id is longer than 512 characters"),
        (5, "t", "call id is not text but a number"),
    ],
)
async def test_ids_no_ledger_can_key_are_refused_on_every_store(
    call_id: object, task_id: str, problem: str, pg_schema: str, tmp_path: Path
) -> None:
    """Ids come from the model or the client: a NUL failed on PostgreSQL, a lone surrogate on
    every store, both as INTERNAL_ERROR; an empty id made every id-less call one call."""
    ran: list[int] = []
    stores: list[str | LedgerStore] = [
        "memory://",
        f"sqlite:///{tmp_path / 'ids.db'}",
        PostgresStore(postgres_url(), schema=pg_schema),
    ]
    for ledger in stores:
        keeper = Keeper(principal=APP, ledger=ledger)

        @keeper.tool(effect="write", permissions=[])
        async def bump(by: int) -> int:
            ran.append(by)
            return by

        async with keeper:
            call = ToolCall(
                call_id=call_id,  # type: ignore[arg-type]
                task_id=task_id,
                name="bump",
                arguments={"by": 1},
            )
            result = await keeper.execute(call)
            listed = await keeper.store.list_calls()
        assert result.status is CallStatus.REJECTED and result.error is not None
        assert result.error.code is ErrorCode.INVALID_CALL_ID
        assert problem in result.error.message
        assert listed == []
    assert ran == []
