"""The SQL of agent runs (`LedgerStore.save_run` / `get_run`), shared by the SQL stores.

A save is a compare-and-set on the run's version: an insert that does nothing when the run
exists (expected version 0), else an update guarded by the version read before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import RunRecord

INSERT_RUN = (
    "INSERT INTO runs (run_id, status, state, version, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING"
)
UPDATE_RUN = (
    "UPDATE runs SET status = ?, state = ?, version = ?, updated_at = ?"
    " WHERE run_id = ? AND version = ? RETURNING created_at"
)
SELECT_RUN = (
    "SELECT run_id, status, state, version, created_at, updated_at FROM runs WHERE run_id = ?"
)
SELECT_RUN_VERSION = "SELECT version FROM runs WHERE run_id = ?"


def insert_params(record: RunRecord, now: float) -> tuple[Any, ...]:
    """Parameters of `INSERT_RUN`: the first save."""
    return (record.run_id, record.status, record.state, 1, now, now)


def update_params(record: RunRecord, expected: int, now: float) -> tuple[Any, ...]:
    """Parameters of `UPDATE_RUN`: a save over version `expected`."""
    return (record.status, record.state, expected + 1, now, record.run_id, expected)


def stored(record: RunRecord, expected: int, created_at: float, now: float) -> RunRecord:
    """The record as a save at `now` stored it."""
    return RunRecord(
        run_id=record.run_id,
        status=record.status,
        state=record.state,
        version=expected + 1,
        created_at=created_at,
        updated_at=now,
    )


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A `RunRecord` from a `SELECT_RUN` row."""
    return RunRecord(
        run_id=str(row[0]),
        status=str(row[1]),
        state=str(row[2]),
        version=int(row[3]),
        created_at=float(row[4]),
        updated_at=float(row[5]),
    )
