"""Child process: wait for `go` on stdin, then open a keeper on a SQLite ledger (which may not
exist yet), make one call with a PIN and print how it ended (`SUCCEEDED`, `replayed`, or the
error code). The tool appends a line to the effects file each time it runs.

Usage: python unlock_on_go.py LEDGER EFFECTS
"""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
from pydantic import Field

from toolkeeper import Keeper, Principal, ToolCall

Pin = Annotated[str, Field(json_schema_extra={"x-sensitive": True})]


async def main(ledger: str, effects: str) -> None:
    print("ready", flush=True)
    sys.stdin.readline()
    keeper = Keeper(
        principal=Principal(id="local", grants=frozenset({"*"})), ledger=f"sqlite:///{ledger}"
    )

    @keeper.tool(effect="write")
    def unlock(door: str, pin: Pin) -> str:
        with open(effects, "a") as out:
            out.write(f"{door}\n")
        return "open"

    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="unlock", arguments='{"door": "front", "pin": "4821"}')
        )
    if result.error is not None:
        print(result.error.code, flush=True)
    else:
        print("replayed" if result.replayed else result.status, flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
