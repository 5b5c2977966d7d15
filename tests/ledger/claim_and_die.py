"""Child process: claim RUNNING calls in a ledger, then die by SIGKILL before ending them.

Usage: python claim_and_die.py URL [SCHEMA]
"""

from __future__ import annotations

import os
import signal
import sys

import anyio

from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import CallRecord, LedgerStore, current_owner, open_store


def _record(call_id: str, *, idempotent: bool) -> CallRecord:
    return CallRecord(
        task_id="crash",
        call_id=call_id,
        tool="payments.transfer",
        version="1",
        digest="ef" * 32,
        arguments={"amount": 5},
        principal_id="alice",
        tenant="acme",
        status=CallStatus.RUNNING,
        effect="write",
        idempotent=idempotent,
        idempotency_key=f"tk-crash-{call_id}",
        attempt=1,
        owner=current_owner(),
    )


async def main(url: str, schema: str | None) -> None:
    store: LedgerStore
    if schema is None:
        store = open_store(url)
    else:
        from toolkeeper.ledger import PostgresStore

        store = PostgresStore(url, schema=schema)
    await store.open()
    await store.claim_call(_record("transfer", idempotent=False))
    await store.claim_call(_record("lookup", idempotent=True))
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
