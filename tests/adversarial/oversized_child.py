"""A process that proposes one oversized call twice and prints what each proposal got.

Usage: python oversized_child.py LEDGER_URL PATH
PATH is `execute`, `execute_many` or `call_tool`. A watchdog thread ends the process with
exit status 3 when the two proposals take longer than `WATCHDOG` seconds: a proposal that
spins holds the event loop, where no timeout of anyio's can end it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.adversarial.tools import MALLORY, register
from toolkeeper import Keeper, ToolCall

WATCHDOG = 2.0
HUGE = "x" * (1024 * 1024 + 10)


async def main(ledger: str, path: str) -> None:
    keeper = Keeper(ledger=ledger)
    register(keeper)
    if path == "call_tool":
        keeper.enable_discovery()
        call = ToolCall(
            call_id="big",
            name="call_tool",
            arguments={"name": "adv.read", "arguments": {"text": HUGE}},
            principal=MALLORY,
        )
    else:
        call = ToolCall(call_id="big", name="adv.read", arguments={"text": HUGE}, principal=MALLORY)
    async with keeper:
        watchdog = threading.Timer(WATCHDOG, os._exit, args=(3,))
        watchdog.daemon = True
        watchdog.start()
        answers = []
        for _ in range(2):
            started = time.monotonic()
            if path == "execute_many":
                [result] = await keeper.execute_many([call])
            else:
                result = await keeper.execute(call)
            code = result.error.code.value if result.error else None
            answers.append({"code": code, "seconds": time.monotonic() - started})
        watchdog.cancel()
    print(json.dumps(answers))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
