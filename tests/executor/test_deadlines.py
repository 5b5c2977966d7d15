"""Each attempt is cancelled at its own deadline, however many are in flight and on whatever
event loop (on asyncio one timer per loop watches them all: `executor.deadlines`)."""

import threading
import time

import anyio
import pytest

from toolkeeper import CallStatus, Keeper, RetryPolicy, ToolCall
from toolkeeper.executor.deadlines import Deadlines, LoopDeadlines
from toolkeeper.testing import MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_calls_in_flight_each_time_out_at_their_own_deadline() -> None:
    # A long deadline first holds the timer; a shorter one after it must still fire first,
    # and the one after that when its own time comes.
    ended: dict[str, tuple[CallStatus, float]] = {}
    release = anyio.Event()
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="read_only", timeout=30)
        async def patient() -> str:
            await release.wait()
            return "done"

        @keeper.tool(effect="read_only", timeout=0.05, retry=RetryPolicy(max_attempts=1))
        async def hasty() -> str:
            await anyio.sleep_forever()
            return "never"

        @keeper.tool(effect="read_only", timeout=0.3, retry=RetryPolicy(max_attempts=1))
        async def steady() -> str:
            await anyio.sleep_forever()
            return "never"

        started = time.monotonic()

        async def run(name: str) -> None:
            result = await keeper.execute(ToolCall(call_id=name, name=name))
            ended[name] = (result.status, time.monotonic() - started)
            if {"hasty", "steady"} <= ended.keys():
                release.set()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "patient")
                await anyio.sleep(0.01)
                tg.start_soon(run, "steady")
                tg.start_soon(run, "hasty")
    assert ended["hasty"][0] is CallStatus.TIMED_OUT
    assert ended["steady"][0] is CallStatus.TIMED_OUT
    assert ended["patient"][0] is CallStatus.SUCCEEDED
    assert ended["hasty"][1] < ended["steady"][1]
    assert ended["steady"][1] >= 0.3


async def test_a_retry_has_a_deadline_of_its_own() -> None:
    # The second attempt starts after the first one's deadline has passed: it runs to its
    # end within its own.
    attempts = 0
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(
            effect="read_only",
            timeout=0.2,
            retry=RetryPolicy(max_attempts=2, initial_interval=0.01),
        )
        async def flaky() -> str:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                await anyio.sleep_forever()
            await anyio.sleep(0.05)
            return "second"

        result = await keeper.execute(ToolCall(call_id="c1", name="flaky"))
    assert result.status is CallStatus.SUCCEEDED and result.data == "second"
    assert result.attempt == 2


async def test_a_sync_tool_past_its_deadline_times_out_and_is_left_to_finish() -> None:
    go, finished = threading.Event(), threading.Event()
    async with Keeper(principal=APP, ledger=MemoryStore()) as keeper:

        @keeper.tool(effect="read_only", timeout=0.05, retry=RetryPolicy(max_attempts=1))
        def blocking() -> str:
            go.wait(10)
            finished.set()
            return "late"

        result = await keeper.execute(ToolCall(call_id="c1", name="blocking"))
        assert result.status is CallStatus.TIMED_OUT
        assert not finished.is_set()  # (the call did not wait for the thread)
        go.set()
        assert await anyio.to_thread.run_sync(finished.wait, 10)


def _cancelled_at(deadlines: Deadlines, seconds: float, let_go_first: bool) -> bool:
    """Whether a scope watched with a deadline `seconds` away is cancelled (on a new loop)."""

    async def main() -> bool:
        with anyio.CancelScope() as scope:
            watched = deadlines.watch(scope, time.monotonic() + seconds)
            if let_go_first:
                deadlines.let_go(watched, scope)
            try:
                await anyio.sleep(max(seconds, 0) + 0.1)
            finally:
                deadlines.let_go(watched, scope)
        return scope.cancelled_caught

    return anyio.run(main, backend="asyncio")


def test_one_set_of_deadlines_serves_a_loop_started_after_another_stopped() -> None:
    deadlines = LoopDeadlines()
    assert _cancelled_at(deadlines, 0.05, let_go_first=False)
    # the first loop's timer is gone with its loop: the second loop gets its own
    assert _cancelled_at(deadlines, 0.05, let_go_first=False)
    assert not _cancelled_at(deadlines, 0.05, let_go_first=True)


def test_a_deadline_already_past_cancels_at_once() -> None:
    deadlines = LoopDeadlines()
    assert _cancelled_at(deadlines, -1.0, let_go_first=False)
