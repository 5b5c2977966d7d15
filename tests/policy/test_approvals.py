import pytest

from toolkeeper import CallStatus, Keeper, ToolCall
from toolkeeper.ledger.base import ApprovalStatus
from toolkeeper.testing import MemoryStore

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
    keeper = Keeper(ledger=MemoryStore())

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
