"""Retries follow the declared effect; timeouts of unsafe tools end UNKNOWN_OUTCOME."""

from typing import Any

import anyio
import pytest

from toolkeeper import (
    CallContext,
    CallStatus,
    ErrorCode,
    Keeper,
    OutcomeUnknown,
    RetryLater,
    RetryPolicy,
    ToolCall,
    ToolFailed,
    UpstreamUnavailable,
)
from toolkeeper.core.errors import ToolError
from toolkeeper.ledger import CallRecord
from toolkeeper.testing import FakeClock, MemoryAuditSink, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


async def test_a_read_only_tool_is_retried_with_backoff(keeper: Keeper, clock: FakeClock) -> None:
    attempts: list[int] = []

    @keeper.tool(effect="read_only", retry=RetryPolicy(max_attempts=3, jitter=0.0))
    async def fetch(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RetryLater("busy")
        return "data"

    result = await keeper.execute(ToolCall(call_id="c1", name="fetch"))
    assert result.ok and result.attempt == 3
    assert attempts == [1, 2, 3]
    assert clock.slept == [0.2, 0.4]


async def test_a_non_idempotent_write_is_never_retried(keeper: Keeper) -> None:
    attempts: list[int] = []

    @keeper.tool(effect="write")
    async def charge(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        raise RetryLater("payment service busy")

    result = await keeper.execute(ToolCall(call_id="c1", name="charge"))
    assert result.status is CallStatus.FAILED
    assert result.error is not None and result.error.retryable
    assert attempts == [1]


async def test_an_idempotent_write_is_retried_with_the_same_idempotency_key(
    keeper: Keeper,
) -> None:
    keys: list[str] = []

    @keeper.tool(effect="write", idempotent=True)
    async def upsert(ctx: CallContext) -> str:
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            raise OutcomeUnknown("connection reset")
        return "ok"

    result = await keeper.execute(ToolCall(call_id="c1", name="upsert"))
    assert result.ok and result.attempt == 2
    assert len(set(keys)) == 1
    record = await keeper.store.get_call("default", "c1")
    assert record is not None and record.idempotency_key == keys[0]
    assert [s for s, _ in record.history] == [
        CallStatus.RUNNING,
        CallStatus.RUNNING,
        CallStatus.SUCCEEDED,
    ]


async def test_nothing_sent_is_retried_even_for_a_non_idempotent_tool(keeper: Keeper) -> None:
    attempts: list[int] = []

    @keeper.tool(effect="write")
    async def send(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise UpstreamUnavailable("not connected")
        return "sent"

    result = await keeper.execute(ToolCall(call_id="c1", name="send"))
    assert result.ok and attempts == [1, 2]


async def test_a_non_retryable_failure_is_not_retried(keeper: Keeper) -> None:
    attempts: list[int] = []

    @keeper.tool(effect="read_only")
    async def lookup(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        raise ToolFailed("no such customer", details={"customer": "42"})

    result = await keeper.execute(ToolCall(call_id="c1", name="lookup"))
    assert result.error is not None and result.error.code is ErrorCode.TOOL_ERROR
    assert result.error.message == "no such customer"
    assert attempts == [1]


async def test_a_timed_out_non_idempotent_write_ends_unknown_outcome(keeper: Keeper) -> None:
    started = anyio.Event()

    @keeper.tool(effect="write", timeout=0.05)
    async def transfer() -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    result = await keeper.execute(ToolCall(call_id="c1", name="transfer"))
    assert started.is_set()
    assert result.status is CallStatus.UNKNOWN_OUTCOME
    assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_OUTCOME
    assert result.error.details == {"cause": "TIMEOUT"}
    assert result.attempt == 1
    [record] = await keeper.unknown()
    assert record.call_id == "c1"


async def test_a_timed_out_read_is_retried_then_ends_timed_out(keeper: Keeper) -> None:
    attempts: list[int] = []

    @keeper.tool(effect="read_only", timeout=0.02, retry=RetryPolicy(max_attempts=2))
    async def slow(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        await anyio.sleep_forever()
        return "never"

    result = await keeper.execute(ToolCall(call_id="c1", name="slow"))
    assert result.status is CallStatus.TIMED_OUT
    assert result.error is not None and result.error.code is ErrorCode.TIMEOUT
    assert attempts == [1, 2]


async def test_a_cancelled_write_is_recorded_not_left_running(keeper: Keeper) -> None:
    started = anyio.Event()

    @keeper.tool(effect="write")
    async def slow_write() -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    async with anyio.create_task_group() as tg:
        tg.start_soon(keeper.execute, ToolCall(call_id="c1", name="slow_write"))
        await started.wait()
        tg.cancel_scope.cancel()
    record = await keeper.store.get_call("default", "c1")
    assert record is not None and record.status is CallStatus.UNKNOWN_OUTCOME


async def test_sync_tools_run_in_a_worker_thread(keeper: Keeper) -> None:
    import threading

    main = threading.get_ident()

    @keeper.tool(effect="read_only")
    def where() -> bool:
        return threading.get_ident() != main

    result = await keeper.execute(ToolCall(call_id="c1", name="where"))
    assert result.ok and result.data is True


async def test_a_write_waiting_to_retry_is_not_taken_for_abandoned() -> None:
    # `toolkeeper ledger unknown` from another shell marked such a call UNKNOWN_OUTCOME:
    # its stored deadline ran out during the wait, though its owner was alive and waiting.
    # (Seen from this process the owner is always alive: the stored deadline is what counts.)
    from toolkeeper.testing import MemoryStore

    clock = FakeClock()
    seen: list[bool] = []
    keeper: Keeper

    async def sleep(seconds: float) -> None:
        record = await keeper.store.get_call("default", "c1")
        assert record is not None
        clock.advance(seconds)  # the end of the wait
        seen.append(record.deadline is not None and record.deadline > clock())

    keeper = Keeper(principal=APP, ledger=MemoryStore(), clock=clock, sleep=sleep)

    @keeper.tool(
        effect="write",
        permissions=[],
        timeout=1.0,
        retry=RetryPolicy(initial_interval=8.0, jitter=0.0, max_attempts=2),
    )
    async def send(ctx: CallContext) -> str:
        if ctx.attempt == 1:
            raise UpstreamUnavailable("connection refused")  # nothing was sent: may retry
        return "sent"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="send"))
    assert result.ok and result.attempt == 2
    assert seen == [True]


async def test_a_retry_wait_given_as_text_is_taken_and_a_bad_one_is_ignored(
    keeper: Keeper, clock: FakeClock
) -> None:
    """`RetryLater(after="2")` (a Retry-After header as read) ended INTERNAL_ERROR with the call
    left RUNNING."""
    attempts: list[int] = []

    @keeper.tool(effect="write", idempotent=True, retry=RetryPolicy(max_attempts=3, jitter=0.0))
    async def sync_stock(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RetryLater("busy", after="2")
        if ctx.attempt == 2:
            raise RetryLater("busy", after="Wed, 21 Oct 2015 07:28:00 GMT")
        return "synced"

    result = await keeper.execute(ToolCall(call_id="c1", name="sync_stock"))
    assert result.ok and attempts == [1, 2, 3]
    assert clock.slept == [2.0, 0.4]


def test_retry_policies_out_of_range_are_refused_and_huge_backoff_is_capped() -> None:
    for bad in (
        {"initial_interval": -1},
        {"backoff": 0.5},
        {"max_attempts": -1},
        {"jitter": 2},
        {"max_interval": float("nan")},
    ):
        with pytest.raises(ValueError, match="out of range"):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    assert RetryPolicy(backoff=1e200, jitter=0.0, max_interval=5).delay(4) == 5


async def test_a_retry_policy_that_raises_ends_the_call_as_its_attempt_did(keeper: Keeper) -> None:
    """`should_retry` raising left the call RUNNING and answered INTERNAL_ERROR."""

    class Broken(RetryPolicy):
        def should_retry(self, error: ToolError, attempt: int) -> bool:
            raise KeyError("attempts_left")

    @keeper.tool(effect="write", idempotent=True, permissions=[], retry=Broken())
    async def put(key: str) -> str:
        raise RetryLater("busy")

    result = await keeper.execute(ToolCall(call_id="c1", name="put", arguments={"key": "k"}))
    record = await keeper.store.get_call("default", "c1")
    assert result.status is CallStatus.FAILED and result.error is not None
    assert result.error.message == "busy"
    assert record is not None and record.status is CallStatus.FAILED


async def test_a_call_cancelled_while_waiting_to_retry_what_never_left_is_cancelled() -> None:
    """No attempt sent anything (the upstream could not be reached): cancelled during the wait
    it ended UNKNOWN_OUTCOME, for a person to settle a call that did nothing."""
    waiting = anyio.Event()

    async def sleep(seconds: float) -> None:
        waiting.set()
        await anyio.sleep_forever()

    keeper = Keeper(principal=APP, ledger="memory://", sleep=sleep)
    tries: list[int] = []

    @keeper.tool(effect="write", permissions=[])
    async def send(to: str) -> str:
        tries.append(1)
        raise UpstreamUnavailable("connection refused")

    async with keeper:
        async with anyio.create_task_group() as tg:
            call = ToolCall(call_id="c1", name="send", arguments={"to": "a"})
            tg.start_soon(keeper.execute, call)
            await waiting.wait()
            tg.cancel_scope.cancel()
        record = await keeper.store.get_call("default", "c1")
    assert tries == [1]
    assert record is not None and record.status is CallStatus.CANCELLED


async def test_a_wait_asked_for_longer_than_the_policy_allows_ends_the_call_to_propose_later(
    keeper: Keeper, clock: FakeClock
) -> None:
    """`RetryLater(after=86400)` held a read with a 5 s timeout for a day, twice over, though
    the policy says no wait is longer than its `max_interval`."""
    attempts: list[int] = []

    @keeper.tool(effect="read_only", timeout=5.0, retry=RetryPolicy(max_interval=10.0))
    async def quota(ctx: CallContext) -> str:
        attempts.append(ctx.attempt)
        raise RetryLater("daily quota used", after=86400)

    result = await keeper.execute(ToolCall(call_id="c1", name="quota"))
    assert attempts == [1] and clock.slept == []
    assert result.status is CallStatus.FAILED and result.error is not None
    assert result.error.retryable and result.error.retry_after == 86400


async def test_a_retry_leaves_a_call_another_process_took_over_to_that_process(
    clock: FakeClock,
) -> None:
    # While this process's first attempt runs, another process takes the call over (the
    # record looked abandoned from there) and runs attempt 2. This process must not write an
    # attempt 2 of its own over that one and run the tool again: it gets the other's result.
    class Shared(MemoryStore):
        """The ledger as another process changes it too: once it has taken the call over,
        it ends its attempt right after this process next changes the record."""

        taken_over = False

        async def transition(self, task_id: str, call_id: str, **change: Any) -> CallRecord:
            try:
                return await super().transition(task_id, call_id, **change)
            finally:
                if self.taken_over:
                    self.taken_over = False
                    await super().transition(
                        task_id,
                        call_id,
                        expected=CallStatus.RUNNING,
                        target=CallStatus.SUCCEEDED,
                        changes={"result": "theirs"},
                    )

    store = Shared()
    runs: list[int] = []
    keeper = Keeper(
        principal=APP, ledger=store, audit=MemoryAuditSink(), clock=clock, sleep=clock.sleep
    )

    @keeper.tool(effect="write", idempotent=True, retry=RetryPolicy(max_attempts=2, jitter=0.0))
    async def upsert(ctx: CallContext) -> str:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            await MemoryStore.transition(  # the other process's takeover
                store,
                ctx.task_id,
                ctx.call_id,
                expected=CallStatus.RUNNING,
                target=CallStatus.RUNNING,
                changes={"attempt": 2, "owner": "elsewhere:1"},
                expected_attempt=1,
            )
            store.taken_over = True
            raise RetryLater("busy")
        return "ours"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="upsert"))
    assert runs == [1]
    assert result.status is CallStatus.SUCCEEDED and result.data == "theirs" and result.replayed
