"""The agent loop with the bundled scripted model: no API key, no network.

The model (`toolkeeper.testing.ScriptedModel`) plays a script: look up an order, then refund
it. The refund is destructive, so the run pauses for a person's approval; once approved, the
run resumes from the ledger and ends with the model's answer. A real model is one line away:
`Agent(keeper, "openai:gpt-4.1-mini")` (extra `toolkeeper[openai]`), `"anthropic:..."`,
`"gemini:..."`. `examples/research_agent.py` tells the longer story, resumed in a new process.

    python examples/agent_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import Keeper, Principal
from toolkeeper.agent import Agent, RunResult
from toolkeeper.testing import ScriptedModel, scripted_call

SUPPORT = Principal(id="support-bot", grants=frozenset({"orders:*"}))

SCRIPT = ScriptedModel(
    [
        scripted_call("get_order", order_id="A-1001"),
        scripted_call("refund", order_id="A-1001", amount=20.0),
        "Refunded 20.00 on order A-1001.",
    ]
)
"""What the model says, turn by turn (the calls by the names the model sees)."""


def build(folder: Path) -> tuple[Keeper, Agent]:
    keeper = Keeper(ledger=f"sqlite:///{folder / 'ledger.db'}")

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    def get_order(order_id: str) -> dict[str, Any]:
        """Look up one order: its status and total."""
        return {"id": order_id, "status": "damaged in transit", "total": 20.0}

    @keeper.tool(effect="destructive", permissions=["orders:refund"])
    def refund(order_id: str, amount: float) -> str:
        """Refund an order. Cannot be taken back."""
        return f"refunded {amount:.2f} on {order_id}"

    return keeper, Agent(keeper, SCRIPT, instructions="You are a support agent.")


def show(label: str, result: RunResult) -> None:
    print(f"{label}: {result.status.value}")
    for outcome in result.calls:
        print(f"  {outcome.call.name} -> {outcome.result.status.name}")
    if result.output:
        print("  answer:", result.output)


async def story(folder: Path) -> None:
    keeper, agent = build(folder)
    async with keeper:
        paused = await agent.run("Order A-1001 arrived broken; refund it.", principal=SUPPORT)
        show("first run", paused)
        (approval,) = paused.approvals
        await keeper.approvals.approve(approval, by="alice")
        print("alice approved", approval[:8] + "...")
        show("resumed", await agent.resume(paused.run_id))
        show("resumed again (nothing runs twice)", await agent.resume(paused.run_id))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(story, Path(folder))


if __name__ == "__main__":
    main()
