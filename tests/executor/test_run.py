"""Steps 8-11: a call written RUNNING whose end the ledger then fails to record."""

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from toolkeeper import CallContext, CallStatus, ErrorCode, Keeper, ToolCall
from toolkeeper.core.errors import StoreError
from toolkeeper.ledger import CallRecord
from toolkeeper.testing import FakeClock, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


class FlakyStore(MemoryStore):
    """A ledger whose transitions fail while `down` (its database unreachable)."""

    down = False

    async def transition(
        self,
        task_id: str,
        call_id: str,
        *,
        expected: CallStatus,
        target: CallStatus,
        changes: Mapping[str, Any] | None = None,
        expected_attempt: int | None = None,
    ) -> CallRecord:
        if self.down:
            raise StoreError("the ledger's database cannot be reached")
        return await super().transition(
            task_id,
            call_id,
            expected=expected,
            target=target,
            changes=changes,
            expected_attempt=expected_attempt,
        )


def _keeper(store: FlakyStore, effects: list[str], *, idempotent: bool) -> Keeper:
    keeper = Keeper(principal=APP, ledger=store, audit=None, clock=FakeClock())

    @keeper.tool(effect="write", idempotent=idempotent)
    async def transfer(amount: int, ctx: CallContext) -> dict[str, str]:
        """Move money."""
        effects.append(ctx.idempotency_key)
        store.down = len(effects) == 1  # the database goes away after the first effect
        return {"transfer": "tx-1"}

    return keeper


CALL = ToolCall(call_id="c1", name="transfer", arguments={"amount": 5})


async def test_an_effect_whose_end_cannot_be_recorded_is_an_unknown_outcome_never_run_again() -> (
    None
):
    store, effects = FlakyStore(), []
    async with _keeper(store, effects, idempotent=False) as keeper:
        result = await keeper.execute(CALL)
        assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_OUTCOME
        store.down = False  # the database is back; the record still says RUNNING
        with anyio.fail_after(5):
            again = await keeper.execute(CALL)
        assert again.error is not None and again.error.code is ErrorCode.UNKNOWN_OUTCOME
        assert [c.call_id for c in await keeper.unknown()] == ["c1"]
    assert len(effects) == 1


async def test_an_idempotent_call_whose_end_cannot_be_recorded_runs_again_when_proposed() -> None:
    store, effects = FlakyStore(), []
    async with _keeper(store, effects, idempotent=True) as keeper:
        result = await keeper.execute(CALL)
        assert result.error is not None and result.error.code is ErrorCode.INTERNAL_ERROR
        assert result.error.retryable
        store.down = False
        with anyio.fail_after(5):
            again = await keeper.execute(CALL)
        assert again.ok and again.data == {"transfer": "tx-1"}
    assert len(effects) == 2


async def test_a_call_given_up_is_listed_unknown_once_the_ledger_is_back() -> None:
    """Told UNKNOWN_OUTCOME, a model does not propose the call again: `unknown()` (and
    `toolkeeper ledger unknown`) must find it, where its live owner kept it RUNNING."""
    store, effects = FlakyStore(), []
    async with _keeper(store, effects, idempotent=False) as keeper:
        await keeper.execute(CALL)
        store.down = False
        assert [c.call_id for c in await keeper.unknown()] == ["c1"]
        assert keeper.runtime.unended == {}
        again = await keeper.execute(CALL)
    assert again.replayed and again.status is CallStatus.UNKNOWN_OUTCOME
    assert len(effects) == 1


async def test_a_cancelled_write_whose_end_cannot_be_recorded_is_still_cancelled() -> None:
    """The ledger failing while the cancellation was recorded replaced the cancellation with a
    retryable INTERNAL_ERROR ("try it again later") for a write that had taken effect, and the
    record stayed RUNNING under its live owner."""
    store, effects = FlakyStore(), []
    keeper = Keeper(principal=APP, ledger=store, audit=None, clock=FakeClock())
    started = anyio.Event()

    @keeper.tool(effect="write")
    async def transfer(amount: int, ctx: CallContext) -> str:
        effects.append(ctx.idempotency_key)
        store.down = True
        started.set()
        await anyio.Event().wait()  # until cancelled
        return "tx-1"

    got: list[object] = []
    async with keeper:

        async def run() -> None:
            got.append(await keeper.execute(CALL))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await started.wait()
                tg.cancel_scope.cancel()
        assert got == []  # the caller was cancelled, not handed a result
        store.down = False
        assert [c.call_id for c in await keeper.unknown()] == ["c1"]
    assert len(effects) == 1


async def test_a_tool_asking_for_approval_while_the_ledger_fails_leaves_no_request_pending() -> (
    None
):
    """The request was stored, the call's record could not be moved to AWAITING_APPROVAL: the
    request stayed pending for ever, though approving it ran nothing. The call, which ran
    nothing, runs and asks anew when proposed again."""
    from toolkeeper import ApprovalRequired
    from toolkeeper.ledger.base import ApprovalStatus

    store, asked, sent = FlakyStore(), [], []
    keeper = Keeper(principal=APP, ledger=store, audit=None, clock=FakeClock())

    @keeper.tool(effect="write")
    async def wire(amount: int, ctx: CallContext) -> str:
        if ctx.approval_id is None:
            asked.append(amount)
            store.down = len(asked) == 1  # the database goes away as the tool first asks
            raise ApprovalRequired("a large transfer")
        sent.append(amount)
        return "sent"

    call = ToolCall(call_id="w1", name="wire", arguments={"amount": 9000})
    async with keeper:
        failed = await keeper.execute(call)
        store.down = False
        assert failed.error is not None and failed.error.code is ErrorCode.INTERNAL_ERROR
        assert failed.error.retryable
        assert await keeper.approvals.pending() == []
        [withdrawn] = await store.list_approvals()
        assert withdrawn.status is ApprovalStatus.WITHDRAWN
        with anyio.fail_after(5):
            waiting = await keeper.execute(call)
        assert waiting.error is not None and waiting.error.code is ErrorCode.APPROVAL_REQUIRED
        assert waiting.approval_id is not None
        assert [p.id for p in await keeper.approvals.pending()] == [waiting.approval_id]
        await keeper.approvals.approve(waiting.approval_id, by="alice")
        ran = await keeper.execute(call)
    assert ran.ok and sent == [9000]
