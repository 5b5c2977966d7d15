"""A process that proposes a write and is SIGKILLed between its effect and its record.

Usage: python crash_child.py LEDGER_URL EFFECT_FILE PATH
PATH is `execute`, `execute_many` or `call_tool`: the route the write takes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from toolkeeper import Keeper, ToolCall

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.adversarial.tools import MALLORY, register


def proposal(path: str, effects: str) -> ToolCall:
    """The one write every run of the scenario proposes (also after the restart)."""
    arguments = {"path": effects, "line": "paid"}
    if path == "call_tool":
        return ToolCall(
            call_id="pay-1",
            task_id="crash",
            name="call_tool",
            arguments={"name": "adv.crash_write", "arguments": arguments},
            principal=MALLORY,
        )
    return ToolCall(
        call_id="pay-1",
        task_id="crash",
        name="adv.crash_write",
        arguments=arguments,
        principal=MALLORY,
    )


async def main(ledger: str, effects: str, path: str) -> None:
    keeper = Keeper(ledger=ledger)
    register(keeper)
    if path == "call_tool":
        keeper.enable_discovery()
    async with keeper:
        call = proposal(path, effects)
        if path == "execute_many":
            await keeper.execute_many([call])
        else:
            await keeper.execute(call)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
