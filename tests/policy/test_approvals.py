from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from toolkeeper import CallStatus, Keeper, ToolCall
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.ledger.base import ApprovalRecord, ApprovalStatus
from toolkeeper.ledger.sqlite import SQLiteStore
from toolkeeper.policy.approvals import Approvals
from toolkeeper.testing import FakeClock, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("decide", "kwargs"),
    [
        ("approve", {"by": ""}),
        ("approve", {"by": "  "}),
        ("deny", {"by": "", "reason": "too much"}),
        ("deny", {"by": "alice", "reason": ""}),
    ],
)
async def test_a_decision_that_names_no_one_or_no_reason_is_refused(
    decide: str, kwargs: dict[str, str]
) -> None:
    """`approve(id, by="")` granted a destructive call that no one in the audit trail had
    approved, and `deny(..., reason="")` told the model nothing (the CLI refused both)."""
    keeper = Keeper(principal=APP, ledger=MemoryStore())

    @keeper.tool(effect="destructive")
    async def wipe(disk: str) -> str:
        return disk

    call = ToolCall(call_id="c1", name="wipe", arguments={"disk": "d1"})
    async with keeper:
        asked = await keeper.execute(call)
        assert asked.status is CallStatus.AWAITING_APPROVAL and asked.approval_id is not None
        with pytest.raises(ValueError, match="non-empty"):
            await getattr(keeper.approvals, decide)(asked.approval_id, **kwargs)
        request = await keeper.approvals.get(asked.approval_id)
        assert request is not None and request.status is ApprovalStatus.PENDING
        assert (await keeper.execute(call)).status is CallStatus.AWAITING_APPROVAL


class _ListsThen(SQLiteStore):
    """A store whose listing lets another process act right after it read the rows."""

    then: Callable[[], Awaitable[object]]

    async def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 1000
    ) -> list[ApprovalRecord]:
        rows = await super().list_approvals(status=status, limit=limit)
        await self.then()
        return rows


async def test_listing_requests_while_another_process_expires_them_leaves_them_out(
    tmp_path: Path,
) -> None:
    """Two `toolkeeper approvals list` at once (or a listing racing a decision) both found an
    expired request pending: the one that marked it expired second failed with ValueError."""
    clock = FakeClock()
    keeper = Keeper(
        principal=APP, ledger=SQLiteStore(tmp_path / "ledger.db"), clock=clock, approval_ttl=60
    )

    @keeper.tool(effect="destructive")
    async def wipe(disk: str) -> str:
        return disk

    async with keeper:
        asked = await keeper.execute(ToolCall(call_id="c1", name="wipe", arguments={"disk": "d"}))
    clock.advance(61)
    async with (
        SQLiteStore(tmp_path / "ledger.db") as other,
        _ListsThen(tmp_path / "ledger.db") as mine,
    ):
        mine.then = Approvals(lambda: other, clock=clock).pending
        assert await Approvals(lambda: mine, clock=clock).pending() == []
        request = await other.get_approval(str(asked.approval_id))
    assert request is not None and request.status is ApprovalStatus.EXPIRED


async def test_pending_holds_every_waiting_request() -> None:
    # The store lists 1,000 requests unless told otherwise: `pending()` is not a page of them.
    keeper = Keeper(principal=APP, ledger=MemoryStore())

    @keeper.tool(effect="destructive")
    async def wipe(disk: str) -> str:
        return disk

    async with keeper:
        calls = [
            ToolCall(call_id=f"c{n}", name="wipe", arguments={"disk": f"d{n}"}) for n in range(1001)
        ]
        for result in await keeper.execute_many(calls):
            assert result.status is CallStatus.AWAITING_APPROVAL
        pending = await keeper.approvals.pending()
    assert len(pending) == 1001


@pytest.mark.parametrize("ttl", [0, -60, float("nan"), float("inf"), "3600"])
def test_an_approval_ttl_that_is_not_a_positive_number_of_seconds_is_refused(
    ttl: object,
) -> None:
    """`Keeper(approval_ttl=0)` (read as "no expiry", as some stores take 0) made every request
    expired when made: each destructive call asked for an approval that approving refused
    ('has expired'), so none could ever run; NaN never expired, and text failed every call
    that needed a request as an INTERNAL_ERROR."""
    store = MemoryStore()
    with pytest.raises(ValueError, match="ttl"):
        Approvals(lambda: store, ttl=ttl)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="approval_ttl"):
        Keeper(principal=APP, ledger=store, approval_ttl=ttl)  # type: ignore[arg-type]
    assert Keeper(principal=APP, ledger=store, approval_ttl=None).approvals is not None
