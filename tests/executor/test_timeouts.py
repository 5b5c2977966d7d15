"""Timeouts hold on every event loop anyio runs on, whatever the tool does with cancel scopes."""

import anyio
import anyio.lowlevel
import msgspec
import pytest

from toolkeeper import Budgets, CallStatus, ErrorCode, Keeper, RetryPolicy, ToolCall
from toolkeeper.ledger.base import CallRecord
from toolkeeper.testing import MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _no_wait(seconds: float) -> None:
    """Retry waits of no time (a test's)."""
    await anyio.lowlevel.checkpoint()


async def test_a_tool_that_never_suspends_returns_its_value() -> None:
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool()
        async def double(x: int) -> int:
            return 2 * x

        result = await keeper.execute(ToolCall(call_id="c1", name="double", arguments={"x": 4}))
    assert result.ok and result.data == 8


async def test_a_tool_that_suspends_runs_to_its_end() -> None:
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(timeout=5)
        async def later(x: int) -> int:
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            return x

        result = await keeper.execute(ToolCall(call_id="c1", name="later", arguments={"x": 3}))
    assert result.ok and result.data == 3


async def test_a_tool_with_its_own_cancel_scopes_keeps_them_apart_from_the_timeout() -> None:
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="read_only", timeout=0.2, retry=RetryPolicy(max_attempts=1))
        async def careful() -> str:
            with anyio.move_on_after(0.01) as inner:  # the tool's own deadline fires first
                await anyio.sleep_forever()
            assert inner.cancelled_caught
            with anyio.fail_after(5):
                await anyio.lowlevel.checkpoint()
            await anyio.sleep_forever()  # then the call's timeout ends it
            return "never"

        result = await keeper.execute(ToolCall(call_id="c1", name="careful"))
    assert result.status is CallStatus.TIMED_OUT
    assert result.error is not None and result.error.code is ErrorCode.TIMEOUT


async def test_cancelling_the_caller_cancels_the_tool_and_not_as_a_timeout() -> None:
    started = anyio.Event()
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="write", idempotent=True, timeout=60)
        async def slow() -> str:
            started.set()
            await anyio.sleep_forever()
            return "never"

        await _cancel_once_started(keeper, ToolCall(call_id="c1", name="slow"), started)
        record = await keeper.store.get_call("default", "c1")
    assert record is not None and record.status is CallStatus.CANCELLED


class _SlowAnswer(MemoryStore):
    """A ledger whose write lands but whose answer is late, as PostgreSQL's commit can be:
    a caller cancelled meanwhile never learns it was written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = anyio.Event()
        self.answer = anyio.Event()

    async def claim_call(self, record: CallRecord) -> tuple[CallRecord, bool]:
        result = await super().claim_call(record)
        if record.status is CallStatus.RUNNING:
            self.written.set()
            await self.answer.wait()
        return result


async def test_a_call_cancelled_while_running_is_written_ends_cancelled_without_running() -> None:
    """It stayed RUNNING (the write landed, the cancellation skipped its end): proposed again
    it waited for a deadline and then CALL_IN_PROGRESS, and a person had to reconcile a call
    that never ran."""
    store = _SlowAnswer()
    ran: list[str] = []
    async with Keeper(principal=APP, ledger=store) as keeper:

        @keeper.tool(effect="write", permissions=[])
        async def charge() -> str:
            ran.append("charge")
            return "charged"

        async with anyio.create_task_group() as tg:
            tg.start_soon(keeper.execute, ToolCall(call_id="c1", name="charge"))
            await store.written.wait()
            tg.cancel_scope.cancel()
            store.answer.set()
        record = await keeper.store.get_call("default", "c1")
        assert ran == []
        again = await keeper.execute(ToolCall(call_id="c1", name="charge"))
    assert record is not None and record.status is CallStatus.CANCELLED
    # Nothing ran, so running it when proposed again is safe: it runs, once.
    assert again.ok and not again.replayed and ran == ["charge"]


async def test_a_timeout_the_tool_raises_itself_is_not_reported_as_the_keepers() -> None:
    """A socket timing out at once was "did not finish within 30 s" after 2 ms."""
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="read_only", timeout=30, retry=RetryPolicy(max_attempts=1))
        async def lookup_dns() -> str:
            raise TimeoutError("timed out")  # socket.timeout is TimeoutError

        @keeper.tool(effect="write", permissions=[], timeout=30)
        async def send() -> str:
            raise TimeoutError("timed out")

        looked = await keeper.execute(ToolCall(call_id="c1", name="lookup_dns"))
        sent = await keeper.execute(ToolCall(call_id="c2", name="send"))
    assert looked.status is CallStatus.FAILED and looked.error is not None
    assert looked.error.code is ErrorCode.TOOL_ERROR and looked.error.retryable
    assert "timed out waiting for the service" in looked.error.message
    assert sent.status is CallStatus.UNKNOWN_OUTCOME  # its request may have left


async def test_a_cancelled_read_or_idempotent_call_runs_when_proposed_again() -> None:
    """It replayed CANCELLED for ever, though running it again is safe; a budget of one call
    does not count the cancelled run as another call."""
    started = anyio.Event()
    runs: list[str] = []
    keeper = Keeper(principal=APP, ledger=MemoryStore(), budgets=Budgets(max_calls_per_task=1))
    async with keeper:

        @keeper.tool(effect="write", idempotent=True, permissions=[])
        async def upsert(key: str) -> str:
            runs.append(key)
            if len(runs) == 1:
                started.set()
                await anyio.sleep_forever()
            return key

        call = ToolCall(call_id="u1", name="upsert", arguments={"key": "k"})
        await _cancel_once_started(keeper, call, started)
        cancelled = await keeper.store.get_call("default", "u1")
        again = await keeper.execute(call)
        replayed = await keeper.execute(call)
    assert cancelled is not None and cancelled.status is CallStatus.CANCELLED
    assert again.ok and runs == ["k", "k"] and again.attempt == cancelled.attempt + 1
    assert replayed.replayed and replayed.ok and runs == ["k", "k"]


async def test_a_cancelled_call_refused_when_proposed_again_still_counts() -> None:
    """It became REJECTED (not counted) though it may have run: a budget of 1 let a second
    call run. And a call whose tool is no longer idempotent is not re-run on the old promise."""
    started = anyio.Event()
    charged: list[str] = []
    keeper = Keeper(principal=APP, ledger=MemoryStore(), budgets=Budgets(max_calls_per_task=1))
    async with keeper:

        @keeper.tool(effect="write", idempotent=True, permissions=["pay"])
        async def charge(order: str) -> str:
            charged.append(order)
            if len(charged) == 1:
                started.set()
                await anyio.sleep_forever()
            return order

        first = ToolCall(call_id="c1", name="charge", arguments={"order": "A"})
        await _cancel_once_started(keeper, first, started)
        from toolkeeper import Principal

        nobody = Principal(id="local", grants=frozenset())  # the same call, now not permitted
        refused = await keeper.execute(msgspec.structs.replace(first, principal=nobody))
        record = await keeper.store.get_call("default", "c1")
        second = await keeper.execute(
            ToolCall(call_id="c2", name="charge", arguments={"order": "B"})
        )

        @keeper.tool(name="charge", effect="write", idempotent=False, permissions=[], version="2")
        async def charge_v2(order: str) -> str:
            charged.append(f"v2:{order}")
            return order

        again = await keeper.execute(first)
    assert refused.error is not None and record is not None
    assert record.status is CallStatus.CANCELLED  # still counted
    assert second.error is not None and second.error.code is ErrorCode.BUDGET_EXCEEDED
    assert again.replayed and again.status is CallStatus.CANCELLED  # not re-run as v2
    assert charged == ["A"]


async def _cancel_once_started(keeper: Keeper, call: ToolCall, started: anyio.Event) -> None:
    """Propose `call` and cancel the proposal once its tool has `started`."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(keeper.execute, call)
        await started.wait()
        tg.cancel_scope.cancel()


async def test_a_retried_call_that_times_out_says_the_timeout_is_per_attempt() -> None:
    async with Keeper(principal=APP, ledger=MemoryStore(), sleep=_no_wait) as keeper:

        @keeper.tool(
            effect="read_only",
            timeout=0.05,
            retry=RetryPolicy(max_attempts=2, initial_interval=0.01),
        )
        async def stuck() -> str:
            await anyio.sleep_forever()
            return "never"

        result = await keeper.execute(ToolCall(call_id="c1", name="stuck"))
    assert result.status is CallStatus.TIMED_OUT and result.attempt == 2
    assert result.error is not None
    assert result.error.message == (
        "stuck did not finish within 0.05 s (attempt 2; each attempt may take 0.05 s)"
    )
    assert result.error.details["attempt"] == 2


async def test_a_draining_keeper_ends_calls_after_their_current_attempt() -> None:
    # A server asked to stop drains its keeper: a hung read retried three times held the
    # shutdown for three timeouts.
    async with Keeper(principal=APP, ledger=MemoryStore(), sleep=_no_wait) as keeper:

        @keeper.tool(effect="read_only", timeout=0.05, retry=RetryPolicy(max_attempts=3))
        async def stuck() -> str:
            keeper.drain()  # the stop arrives while the first attempt runs
            await anyio.sleep_forever()
            return "never"

        result = await keeper.execute(ToolCall(call_id="c1", name="stuck"))
    assert result.status is CallStatus.TIMED_OUT and result.attempt == 1


async def test_draining_ends_a_call_waiting_to_retry_at_once() -> None:
    from toolkeeper import RetryLater

    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="read_only", retry=RetryPolicy(max_attempts=3, max_interval=60.0))
        async def busy() -> str:
            raise RetryLater("the service is busy", after=30)

        results = []

        async def call() -> None:
            results.append(await keeper.execute(ToolCall(call_id="c1", name="busy")))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                while not keeper.runtime.waits:  # the call waits its 30 s to retry...
                    await anyio.lowlevel.checkpoint()
                keeper.drain()  # ...and the server stops
    [result] = results
    assert result.status is CallStatus.FAILED and result.attempt == 1
    assert result.error is not None and result.error.message == "the service is busy"


async def test_a_drain_while_the_next_attempt_is_recorded_ends_the_call_without_its_wait() -> None:
    from toolkeeper import RetryLater

    class DrainOnRetryRecord:  # the stop arrives as the record moves to attempt 2
        keeper: Keeper | None = None

        def emit(self, event: object) -> None:
            if getattr(event, "attempt", 0) == 2 and self.keeper is not None:
                self.keeper.drain()

        def close(self) -> None:
            pass

    sink = DrainOnRetryRecord()
    async with Keeper(principal=APP, ledger=MemoryStore(), audit=sink) as keeper:
        sink.keeper = keeper

        @keeper.tool(effect="write", idempotent=True, retry=RetryPolicy(max_attempts=3))
        async def put(key: str) -> str:
            raise RetryLater("busy", after=30)

        with anyio.fail_after(5):  # not the 30 s wait
            result = await keeper.execute(
                ToolCall(call_id="c1", name="put", arguments={"key": "k"})
            )
        record = await keeper.store.get_call("default", "c1")
    assert result.status is CallStatus.FAILED and result.attempt == 1
    assert record is not None and (record.status, record.attempt) == (CallStatus.FAILED, 1)


async def test_a_read_cancelled_again_when_proposed_again_runs_once_more_not_six_times() -> None:
    """Its CANCELLED record was ended with the attempt of a RUNNING record a read never
    writes: the ledger found it stale, and the pipeline started over (the read run again,
    under the cancellation) until it gave up, five times later."""
    runs: list[int] = []
    started = [anyio.Event(), anyio.Event()]
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="read_only")
        async def look(key: str) -> str:
            runs.append(len(runs))
            started[min(len(runs), 2) - 1].set()
            await anyio.sleep_forever()
            return key

        call = ToolCall(call_id="r1", name="look", arguments={"key": "k"})
        with anyio.fail_after(5):
            await _cancel_once_started(keeper, call, started[0])
            await _cancel_once_started(keeper, call, started[1])
        record = await keeper.store.get_call("default", "r1")
    assert runs == [0, 1]
    assert record is not None and record.status is CallStatus.CANCELLED and record.attempt == 2
