"""The executor: a ledger that cannot be reached refuses a call clearly, and runs nothing."""

import pytest

from toolkeeper import CallStatus, ErrorCode, Keeper, ToolCall
from toolkeeper.core.errors import StoreError
from toolkeeper.ledger import CallRecord
from toolkeeper.testing import MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


class UnreachableStore(MemoryStore):
    """A ledger whose database went away after it was opened."""

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        raise StoreError("the ledger's database cannot be reached")


async def test_a_call_the_ledger_cannot_look_up_is_refused_as_retryable_and_not_run() -> None:
    ran: list[str] = []
    keeper = Keeper(principal=APP, ledger=UnreachableStore(), audit=None)

    @keeper.tool(effect="write")
    def send(text: str) -> str:
        """Send a message."""
        ran.append(text)
        return "sent"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="send", arguments={"text": "hi"}))
    assert result.status is CallStatus.FAILED
    assert result.error is not None and result.error.code is ErrorCode.INTERNAL_ERROR
    assert result.error.retryable
    assert ran == []
