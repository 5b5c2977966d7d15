"""A process that proposes a write and is SIGKILLed between its effect and its record.

Usage: python crash_child.py LEDGER_URL EFFECT_FILE PATH [SCHEMA]
PATH is `execute`, `execute_many` or `call_tool`: the route the write takes. SCHEMA names the
PostgreSQL schema of a `postgresql://` ledger.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from toolkeeper import Keeper, ToolCall
from toolkeeper.ledger import LedgerStore

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


def ledger_of(url: str, schema: str | None) -> LedgerStore | str:
    """The ledger the scenario runs on: a URL, or a PostgreSQL store of its own schema."""
    if schema is None:
        return url
    from toolkeeper.ledger import PostgresStore

    return PostgresStore(url, schema=schema)


async def main(ledger: str, effects: str, path: str, schema: str | None = None) -> None:
    keeper = Keeper(ledger=ledger_of(ledger, schema))
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
    anyio.run(main, *sys.argv[1:5])
