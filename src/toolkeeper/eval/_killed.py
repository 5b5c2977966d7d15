"""The child process of the process-kill scenario of `toolkeeper eval safety`: it proposes one
transfer, which applies its effect and kills this process (SIGKILL) before its end is recorded.

Usage: python -m toolkeeper.eval._killed LEDGER_URL EFFECTS_FILE OPERATION
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from ..core.values import ToolCall
from ..keeper import Keeper
from .faults import AGENT, FileService, add_file_tools

__all__ = ["transfer_call"]


def transfer_call(op: str) -> ToolCall:
    """The transfer the child proposes, and the parent proposes again after the kill."""
    return ToolCall(
        call_id=op,
        task_id="process-kill",
        name="svc.transfer",
        arguments={"op": op},
        principal=AGENT,
    )


async def _main(ledger: str, effects: str, op: str) -> None:
    keeper = Keeper(ledger=ledger)
    add_file_tools(keeper, FileService(path=Path(effects)), die=True)
    async with keeper:
        await keeper.execute(transfer_call(op))


if __name__ == "__main__":
    anyio.run(_main, sys.argv[1], sys.argv[2], sys.argv[3])
