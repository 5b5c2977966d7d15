"""The scale benchmark on a tiny run against the real PostgreSQL and Redis: its report's
shape and the promises it checks, not its speed."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolkeeper.bench import scale
from toolkeeper.bench.scale import bench_scale

from ..conftest import postgres_url, redis_url

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _scale_schemas() -> set[str]:
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'tk_scale_%'")
        return {row[0] for row in rows}


def test_a_tiny_run_reports_every_configuration_with_nothing_duplicated_or_lost(
    tmp_path: Path, pg_schema: str, redis_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []  # (by name: another run of the bench may have a schema meanwhile)
    schema = scale._schema

    @contextlib.asynccontextmanager
    async def noted(postgres: str) -> AsyncIterator[str]:
        async with schema(postgres) as ledger:
            made.extend(re.findall(r"tk_scale_[0-9a-f]{12}", ledger))
            yield ledger

    monkeypatch.setattr(scale, "_schema", noted)
    report = bench_scale(
        processes=[1, 2],
        clients=[4],
        calls=12,
        budget=3,
        budget_calls=10,
        postgres=postgres_url(),
        redis=redis_url(),
        directory=str(tmp_path),
    )
    data = json.loads(json.dumps(report.to_dict()))

    assert [(r["processes"], r["clients"], r["calls"]) for r in data["runs"]] == [
        (1, 4, 12),
        (2, 4, 12),
    ]
    for run in data["runs"]:
        assert (run["failures"], run["duplicates"], run["lost"], run["errors"]) == (0, 0, 0, {})
        assert run["calls_per_second"] > 0
        assert 0 < run["p50_ms"] <= run["p99_ms"]
        assert run["client_cpu"] > 0 and run["gateway_cpu"] > 0
    budget = data["budget"]
    assert (budget["processes"], budget["calls"], budget["budget"]) == (2, 10, 3)
    assert (budget["duplicates"], budget["lost"], budget["failures"]) == (0, 0, 0)
    assert (budget["ran"], budget["refused"], budget["overrun"]) == (3, 7, 0)
    env = data["environment"]
    assert env["cpus"] >= 1 and len(env["load_average"]) == 3
    assert made and not set(made) & _scale_schemas()  # its schema dropped
    assert list(tmp_path.iterdir()) == []  # its files removed
