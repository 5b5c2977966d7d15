"""A child process that performs a side effect and dies by SIGKILL before recording its end.

Usage: python crash_child.py LEDGER_URL EFFECT_FILE
"""

import os
import signal
import sys
from pathlib import Path

import anyio

from toolkeeper import CallContext, Keeper, Principal, ToolCall

APP = Principal(id="local", grants=frozenset({"*"}))
"""The application, acting for itself."""


def build(ledger: str, effects: Path, *, die: bool) -> Keeper:
    keeper = Keeper(principal=APP, ledger=ledger)

    def reconcile(ctx: CallContext) -> object:
        from toolkeeper import CallStatus, ToolResult

        for line in effects.read_text().splitlines():
            key, _, ref = line.partition(" ")
            if key == ctx.idempotency_key:
                return ToolResult(
                    call_id=ctx.call_id,
                    tool=ctx.tool,
                    status=CallStatus.SUCCEEDED,
                    data={"transfer": ref},
                    effect_ref=ref,
                )
        return None

    @keeper.tool(effect="write", reconcile=reconcile)
    async def transfer(amount: int, ctx: CallContext) -> dict[str, str]:
        """Move money (appends one line per transfer to the effect file)."""
        ref = f"tx-{amount}"
        with effects.open("a") as f:
            f.write(f"{ctx.idempotency_key} {ref}\n")
            f.flush()
            os.fsync(f.fileno())
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"transfer": ref}

    return keeper


CALL = ToolCall(call_id="t1", task_id="task-9", name="transfer", arguments={"amount": 5})


async def main(ledger: str, effects: Path) -> None:
    async with build(ledger, effects, die=True) as keeper:
        await keeper.execute(CALL)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], Path(sys.argv[2]))
