from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.bench.ledger import bench_ledger
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import LedgerStore, MemoryStore, SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_ledger_bench_times_both_paths_of_new_calls(tmp_path: Path, backend: str) -> None:
    store: LedgerStore = MemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "b.db")
    await store.open()
    try:
        report = await bench_ledger(store, calls=5, repeats=2)
        assert (report.write.calls, report.read.calls) == (10, 10)
        assert (report.write.failures, report.read.failures) == (0, 0)
        assert report.to_dict()["write"]["median_us"] > 0
        statuses = [r.status for r in await store.list_calls()]
        assert statuses == [CallStatus.SUCCEEDED] * 20
    finally:
        await store.aclose()
