"""Child process: fill the disk under a pending batch, then free it and claim a RUNNING call.

The disk is "full" for a file-size limit (RLIMIT_FSIZE) set on this process only: a result too
large to fit fails, and SQLite rolls back the whole open transaction, the batch with it. Prints
`refused` for that record, then `created` for the RUNNING claim once the limit is lifted.

Usage: python write_after_a_full_disk.py PATH
"""

from __future__ import annotations

import resource
import signal
import sys
from pathlib import Path

import anyio

from toolkeeper.core.errors import StoreError
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import SQLiteStore

from .records import call


async def main(path: Path) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    async with SQLiteStore(path, commit_delay=60) as store:
        read = call("r1", status=CallStatus.SUCCEEDED, effect="read_only", result={"n": 1})
        await store.claim_call(read)  # pending in the batch
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        largest = max(p.stat().st_size for p in path.parent.iterdir())
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest + (1 << 20), hard))
        big = call("big", status=CallStatus.SUCCEEDED, result="x" * (8 << 20))
        try:
            await store.claim_call(big)
        except StoreError:
            print("refused", flush=True)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        _, created = await store.claim_call(call("w1"))
        print("created" if created else "not created", flush=True)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
