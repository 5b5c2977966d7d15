"""Child process: open a ledger, say `ready`, wait for `go` on stdin, claim one call, and
print whether this process inserted it.

Usage: python claim_on_go.py URL [SCHEMA]
"""

from __future__ import annotations

import sys

import anyio

from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import CallRecord, LedgerStore, current_owner, open_store


async def main(url: str, schema: str | None) -> None:
    store: LedgerStore
    if schema is None:
        store = open_store(url)
    else:
        from toolkeeper.ledger import PostgresStore

        store = PostgresStore(url, schema=schema)
    async with store:
        print("ready", flush=True)
        sys.stdin.readline()
        _, inserted = await store.claim_call(
            CallRecord(
                task_id="race",
                call_id="once",
                tool="payments.transfer",
                version="1",
                digest="ab" * 32,
                arguments={},
                principal_id="alice",
                tenant="acme",
                status=CallStatus.RUNNING,
                effect="write",
                idempotent=False,
                idempotency_key="tk-race-once",
                owner=current_owner(),
            )
        )
        print("won" if inserted else "lost", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
