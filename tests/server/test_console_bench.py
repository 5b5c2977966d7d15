"""The console benchmark on tiny ledgers of both stores: every endpoint answered, figures in
the report, the growth between sizes, the PostgreSQL schema dropped; not its speed."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from toolkeeper.server.console_bench import run
from toolkeeper.server.console_bench_fill import Shape, call_rows

from ..conftest import postgres_url

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ENDPOINTS = [
    "calls newest",
    "calls by tool",
    "calls by principal",
    "calls by status",
    "call timeline",
    "pending approvals",
    "audit search",
]


def _bench_schemas() -> set[str]:
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'tk_bench_co%'")
        return {row[0] for row in rows}


def test_a_tiny_run_times_every_endpoint_on_both_stores_at_both_sizes(pg_schema: str) -> None:
    before = _bench_schemas()
    report = anyio.run(
        lambda: run(
            sizes=[300, 600],
            approvals=120,
            stores=["sqlite", "postgres"],
            requests=3,
            postgres=postgres_url(),
        )
    )
    data = json.loads(json.dumps(report.to_dict()))
    assert [(r["store"], r["calls"]) for r in data["runs"]] == [
        ("sqlite", 300),
        ("sqlite", 600),
        ("postgres", 300),
        ("postgres", 600),
    ]
    for r in data["runs"]:
        assert [e["name"] for e in r["endpoints"]] == ENDPOINTS
        assert all(e["failures"] == 0 and e["requests"] == 3 for e in r["endpoints"])
        assert all(0 < size < 100_000 for size in r["pages"].values())
    assert set(data["growth_p50"]) == {"sqlite", "postgres"}
    assert set(data["growth_p50"]["sqlite"]) == set(ENDPOINTS)
    assert _bench_schemas() == before


def test_the_fill_writes_each_call_once_newest_last() -> None:
    rows = list(call_rows(Shape(calls=50, approvals=5)))
    assert len({(r[0], r[1]) for r in rows}) == 50
    created = [r[20] for r in rows]
    assert created == sorted(created)


def test_the_command_refuses_a_bad_size() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper", "bench", "console", "--calls", "ten"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "sizes like" in done.stderr
