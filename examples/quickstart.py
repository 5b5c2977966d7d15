"""Library quickstart: two tools, a refund held for a person's approval, approved, run once,
and replayed from the ledger when the script runs again.

    python examples/quickstart.py     # run it twice: the second run asks nothing, runs nothing

The ledger is `./toolkeeper.db` in the working directory (SQLite; delete `toolkeeper.db*` to
start over).
"""

from __future__ import annotations

from typing import Any

import anyio

from toolkeeper import CallContext, CallStatus, Keeper, Principal, ToolCall

keeper = Keeper()  # ledger: ./toolkeeper.db (SQLite, WAL); audit: ./toolkeeper.audit.jsonl


@keeper.tool(effect="read_only", permissions=["orders:read"])
async def get_order(order_id: str) -> dict[str, Any]:
    """Look up one order. Changes nothing.

    Args:
        order_id: The order number, e.g. "A-1001".
    """
    return {"id": order_id, "status": "shipped"}


@keeper.tool(effect="destructive", permissions=["orders:refund"])
async def refund(order_id: str, amount: float, ctx: CallContext) -> dict[str, Any]:
    """Refund an order. Cannot be taken back."""
    print(f"refunding {amount} on {order_id} (this line prints once, ever)")
    # a real tool passes ctx.idempotency_key to the payment service, which deduplicates too
    return {"refund": f"rf-{order_id}", "key": ctx.idempotency_key[:12]}


async def main() -> None:
    agent = Principal(id="support-bot", grants=frozenset({"orders:*"}))
    async with keeper:
        read = ToolCall(
            call_id="call_0", name="get_order", arguments={"order_id": "A-1001"}, principal=agent
        )
        print("get_order:", (await keeper.execute(read)).data)
        # arguments arrive as the model wrote them: a JSON string (or a dict)
        call = ToolCall(
            call_id="call_1",
            name="refund",
            arguments='{"order_id": "A-1001", "amount": 20}',
            principal=agent,
        )
        result = await keeper.execute(call)
        if result.status is CallStatus.AWAITING_APPROVAL:  # first run only
            assert result.error is not None and result.approval_id is not None
            print("held:", result.status.name, result.error.code.name)
            await keeper.approvals.approve(result.approval_id, by="alice")
            print("approved by alice")
            result = await keeper.execute(call)  # the same call again: it runs now
        print("refund:", result.status.name, result.data, "replayed:", result.replayed)
        again = await keeper.execute(call)  # a retry: the recorded result, not a second refund
        print("again:", again.status.name, "replayed:", again.replayed)


if __name__ == "__main__":
    anyio.run(main)
