"""What the ledger alone costs per call: the store operations of one call, per backend.

Two paths, each timed as one unit per call, on a task of its own:

- *write*: `get_call` (the dedupe look-up, a miss) + `claim_call` RUNNING (committed before
  the side effect) + `transition` RUNNING -> SUCCEEDED with a small result;
- *read*: `get_call` (a miss) + `claim_call` SUCCEEDED with its result (a read-only call
  writes its record once, when it ends).

Used by `toolkeeper bench`; the store must be open, and its existing data is left alone.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from ..core.states import CallStatus
from ..ledger.base import CallRecord, LedgerStore, current_owner
from .stats import Summary, time_async_calls

__all__ = ["LedgerBench", "bench_ledger"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerBench:
    """Per-call times of the two paths on one store."""

    store: str
    """The store measured (its repr)."""
    write: Summary
    """get + claim RUNNING + transition SUCCEEDED."""
    read: Summary
    """get + claim SUCCEEDED."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"store": self.store, "write": self.write.to_dict(), "read": self.read.to_dict()}


def _record(task_id: str) -> CallRecord:
    return CallRecord(
        task_id=task_id,
        call_id="",
        tool="bench.add",
        version="1",
        digest="0" * 64,
        arguments={"a": 1, "b": 2},
        principal_id="bench",
        tenant="bench",
        status=CallStatus.RUNNING,
        effect="write",
        idempotent=False,
        idempotency_key="",
        owner=current_owner(),
    )


async def bench_ledger(store: LedgerStore, *, calls: int = 2000, repeats: int = 3) -> LedgerBench:
    """Time the write and read paths of `calls` new calls, `repeats` times, interleaved.

    Args:
        store: An open store; the calls go to new tasks named `bench-<random>`.
        calls: Calls per path and repeat.
        repeats: Blocks per path, alternating write and read.

    Returns:
        The summaries of both paths.
    """
    base = _record(f"bench-{uuid.uuid4().hex[:12]}")
    write_blocks, read_blocks = [], []
    for repeat in range(repeats):
        task = f"{base.task_id}-{repeat}"
        running = [
            msgspec.structs.replace(base, task_id=task, call_id=f"w{i}", idempotency_key=f"w{i}")
            for i in range(calls)
        ]
        done = [
            msgspec.structs.replace(
                base,
                task_id=task,
                call_id=f"r{i}",
                idempotency_key=f"r{i}",
                status=CallStatus.SUCCEEDED,
                result={"sum": 3},
            )
            for i in range(calls)
        ]

        async def write(i: int, task: str = task, running: list[CallRecord] = running) -> bool:
            await store.get_call(task, f"w{i}")
            _, created = await store.claim_call(running[i])
            await store.transition(
                task,
                f"w{i}",
                expected=CallStatus.RUNNING,
                target=CallStatus.SUCCEEDED,
                changes={"result": {"sum": 3}, "attempt": 1},
            )
            return created

        async def read(i: int, task: str = task, done: list[CallRecord] = done) -> bool:
            await store.get_call(task, f"r{i}")
            _, created = await store.claim_call(done[i])
            return created

        write_blocks.append(await time_async_calls(write, calls, check=lambda _, ok: bool(ok)))
        read_blocks.append(await time_async_calls(read, calls, check=lambda _, ok: bool(ok)))
    return LedgerBench(
        store=repr(store), write=Summary.of(write_blocks), read=Summary.of(read_blocks)
    )
