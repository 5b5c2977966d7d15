"""The tools every integration test drives: a read, a destructive write and an admin tool
the test principal may not see, each counting its runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from toolkeeper import Keeper, Principal

ALICE = Principal(id="alice", grants=frozenset({"orders:read", "orders:write"}))
"""May read orders and refund them (a refund waits for a person's approval)."""


@dataclass
class Shop:
    keeper: Keeper
    runs: Counter[str] = field(default_factory=Counter)
    """How many times each tool's body ran."""
    gate: anyio.Event | None = None
    """When set, `orders.get` waits for it once it has started."""
    entered: anyio.Event | None = None
    """Set once `inside` bodies of `orders.get` have started (and wait for `gate`)."""
    inside: int = 1


def shop(ledger: str = "memory://", principal: Principal | None = None) -> Shop:
    keeper = Keeper(ledger=ledger, principal=principal)
    out = Shop(keeper=keeper)

    @keeper.tool(name="orders.get", effect="read_only", permissions=["orders:read"])
    async def get_order(order_id: str) -> dict[str, object]:
        """Look an order up by id.

        Args:
            order_id: The order's id, such as "A1".
        """
        out.runs["orders.get"] += 1
        if out.gate is not None and out.entered is not None:
            if out.runs["orders.get"] == out.inside:
                out.entered.set()
            await out.gate.wait()
        return {"order_id": order_id, "total": 42}

    @keeper.tool(name="orders.refund", effect="destructive", permissions=["orders:write"])
    async def refund(order_id: str, amount: int) -> str:
        """Refund part of an order; money leaves, so a person approves each refund.

        Args:
            order_id: The order's id.
            amount: How much to refund, in cents.
        """
        out.runs["orders.refund"] += 1
        return f"refunded {amount} on {order_id}"

    @keeper.tool(name="admin.wipe", effect="destructive", permissions=["admin:wipe"])
    async def wipe() -> str:
        """Delete every order."""
        out.runs["admin.wipe"] += 1
        return "wiped"

    return out


BOB = Principal(id="bob", grants=frozenset({"orders:read"}))
"""May read orders only."""


async def proposed_at_once(
    shop_: Shop, runs: int, start: Callable[[int], Awaitable[None]], *, inside: int
) -> None:
    """Start `runs` framework runs; once `inside` bodies of `orders.get` run at once (else the
    test fails by its deadline: they never were), and every other run waits on something,
    let them finish."""
    shop_.gate, shop_.entered, shop_.inside = anyio.Event(), anyio.Event(), inside
    with anyio.fail_after(60):  # (ten runs of a framework take seconds on a busy machine)
        async with anyio.create_task_group() as group:
            for i in range(runs):
                group.start_soon(start, i)
            await shop_.entered.wait()
            await anyio.wait_all_tasks_blocked()
            shop_.gate.set()
