"""Another connection holding a SQLite file's write lock, for the ledger tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio

from toolkeeper.ledger import CallRecord, SQLiteStore


async def claim_while_locked(store: SQLiteStore, path: Path, record: CallRecord) -> bool:
    """Claim `record` while another connection holds the write lock, and release the lock once
    the claim waits; the claim must wait off the event loop. Whether it created the record."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    results: list[bool] = []

    async def claim() -> None:
        results.append((await store.claim_call(record))[1])

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(claim)
            await anyio.wait_all_tasks_blocked()
            # The claim waits in a worker thread, so this task still runs.
            assert results == []
            other.execute("COMMIT")
    finally:
        other.close()
    [created] = results
    return created
