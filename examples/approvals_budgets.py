"""Approvals and budgets: what a person must decide, and how much a task may do.

- A payment above 100 waits for a person (`at_most(..., approve_above=True)`); the approval is
  bound to the exact arguments, so it cannot run a different amount, and a denial is final
  for that call.
- A task may run 3 calls in all (`max_calls_per_task`), and a principal makes at most
  `burst` calls at once before `calls_per_minute` applies (`RATE_LIMITED`, with `retry_after`).

    python examples/approvals_budgets.py     # a memory ledger: nothing is written to disk
"""

from __future__ import annotations

import anyio

from toolkeeper import Budgets, Keeper, Principal, ToolCall, ToolResult, at_most

CLERK = Principal(id="clerk", grants=frozenset({"payments:*", "search:*"}))


def show(label: str, result: ToolResult) -> None:
    error = f" {result.error.code.name}" if result.error else ""
    print(f"{label}: {result.status.name}{error}")


async def approvals() -> None:
    keeper = Keeper(ledger="memory://")

    @keeper.tool(
        effect="write",
        permissions=["payments:send"],
        rules=[at_most("amount", 100, approve_above=True)],
    )
    def pay(to: str, amount: float) -> str:
        """Send a payment."""
        return f"paid {amount} to {to}"

    async with keeper:
        small = ToolCall(
            call_id="p1", name="pay", arguments={"to": "bob", "amount": 40}, principal=CLERK
        )
        show("pay 40", await keeper.execute(small))

        big = ToolCall(
            call_id="p2", name="pay", arguments={"to": "bob", "amount": 500}, principal=CLERK
        )
        held = await keeper.execute(big)
        show("pay 500", held)
        assert held.approval_id is not None
        (request,) = await keeper.approvals.pending()
        print("pending:", request.tool, dict(request.arguments))
        await keeper.approvals.approve(held.approval_id, by="alice")
        show("pay 500 after approval", await keeper.execute(big))

        # the same call id with another amount is not the call alice approved
        changed = ToolCall(
            call_id="p2", name="pay", arguments={"to": "bob", "amount": 900}, principal=CLERK
        )
        show("pay 900 under p2's id", await keeper.execute(changed))

        other = ToolCall(
            call_id="p3", name="pay", arguments={"to": "eve", "amount": 900}, principal=CLERK
        )
        asked = await keeper.execute(other)
        assert asked.approval_id is not None
        await keeper.approvals.deny(asked.approval_id, by="alice", reason="unknown payee")
        show("pay 900 to eve after denial", await keeper.execute(other))


async def budgets() -> None:
    keeper = Keeper(
        ledger="memory://",
        budgets=Budgets(max_calls_per_task=3, calls_per_minute=60, burst=5),
    )

    @keeper.tool(effect="read_only", permissions=["search:run"])
    def search(q: str) -> list[str]:
        """Search the catalog."""
        return [f"{q}-1", f"{q}-2"]

    async with keeper:
        for n in range(1, 5):
            call = ToolCall(
                call_id=f"s{n}",
                name="search",
                arguments={"q": "lamp"},
                principal=CLERK,
                task_id="t1",
            )
            show(f"task t1 call {n}", await keeper.execute(call))
        # a new task has its own budget, but the principal's rate (burst 5) is shared
        for n in range(1, 4):
            call = ToolCall(
                call_id=f"s{n}",
                name="search",
                arguments={"q": "desk"},
                principal=CLERK,
                task_id="t2",
            )
            result = await keeper.execute(call)
            show(f"task t2 call {n}", result)
            if result.error is not None and result.error.retryable:
                print("  retry after", result.error.retry_after, "s")


async def main() -> None:
    await approvals()
    await budgets()


if __name__ == "__main__":
    anyio.run(main)
