"""Python functions run as tools: sync ones in a worker thread, async ones on the loop."""

import functools
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from toolkeeper import CallContext, CallStatus, ErrorCode, Keeper, RetryPolicy, ToolCall
from toolkeeper.core.errors import ConfigurationError

from ..conftest import APP

pytestmark = pytest.mark.anyio


def _logged(func: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator written for sync functions: its wrapper is sync, whatever it wraps."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


async def test_an_async_function_behind_a_sync_wrapper_runs_before_its_call_succeeds() -> None:
    ran: list[str] = []
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="write")
    @_logged
    async def ship(order_id: str) -> str:
        ran.append(order_id)
        return f"shipped {order_id}"

    async def pack(order_id: str) -> str:
        ran.append(order_id)
        return f"packed {order_id}"

    def later(order_id: str) -> Awaitable[str]:
        return pack(order_id)

    keeper.add_function(later, effect="write")
    async with keeper:
        wrapped = await keeper.execute(
            ToolCall(call_id="c1", name="ship", arguments={"order_id": "A-1"})
        )
        returned = await keeper.execute(
            ToolCall(call_id="c2", name="later", arguments={"order_id": "A-2"})
        )
    assert wrapped.status is CallStatus.SUCCEEDED and wrapped.data == "shipped A-1"
    assert returned.status is CallStatus.SUCCEEDED and returned.data == "packed A-2"
    assert ran == ["A-1", "A-2"]


async def test_an_async_generator_behind_a_sync_wrapper_runs_and_returns_what_it_yields() -> None:
    """It never ran: the wrapper returned the generator unstarted, and the call SUCCEEDED with
    a note that its result was not JSON."""
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    @_logged
    async def pages(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="pages", arguments={"n": 2}))
    assert result.status is CallStatus.SUCCEEDED and result.data == [0, 1]


async def test_a_positional_only_context_parameter_receives_the_context() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    def whoami(ctx: CallContext, /, greeting: str) -> str:
        return f"{greeting} {ctx.call_id}"

    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="whoami", arguments={"greeting": "hi"})
        )
    assert result.status is CallStatus.SUCCEEDED and result.data == "hi c1"


async def test_a_generator_tool_runs_to_its_end_in_its_call_and_returns_what_it_yields() -> None:
    """An async generator never ran, and its call SUCCEEDED with a note that the result was not
    JSON; a sync one ran on the event loop once its call had ended, so what it raised
    (ValueError) was taken for an unrecordable result of a call that succeeded."""
    keeper = Keeper(principal=APP, ledger="memory://")
    ran: list[tuple[str, bool]] = []

    @keeper.tool(effect="read_only")
    async def pages(n: int) -> AsyncIterator[int]:
        for i in range(n):
            ran.append(("pages", True))
            yield i

    @keeper.tool(effect="read_only")
    def rows(n: int) -> Iterator[str]:
        for i in range(n):
            ran.append(("rows", threading.current_thread() is not threading.main_thread()))
            yield f"row {i}"

    @keeper.tool(effect="read_only")
    def broken() -> Iterator[int]:
        yield 1
        raise ValueError("the disk went away")

    async with keeper:
        paged = await keeper.execute(ToolCall(call_id="c1", name="pages", arguments='{"n": 2}'))
        listed = await keeper.execute(ToolCall(call_id="c2", name="rows", arguments='{"n": 2}'))
        failed = await keeper.execute(ToolCall(call_id="c3", name="broken"))
    assert paged.status is CallStatus.SUCCEEDED and paged.data == [0, 1]
    assert listed.status is CallStatus.SUCCEEDED and listed.data == ["row 0", "row 1"]
    assert ran == [("pages", True)] * 2 + [("rows", True)] * 2  # rows: in a worker thread
    assert failed.status is CallStatus.FAILED
    assert failed.error is not None and failed.error.code is ErrorCode.TOOL_ERROR
    shown = keeper.catalog.get("pages")
    assert shown is not None
    assert shown.spec.output_schema == {"items": {"type": "integer"}, "type": "array"}


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_sync_tool_that_outlives_its_timeout_ends_at_it_on_every_event_loop() -> None:
    """On trio the call waited for the thread: a write blocked for minutes ended SUCCEEDED."""
    unblock = threading.Event()
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="write", timeout=0.1)
    def stuck() -> str:
        unblock.wait(5)
        return "late"

    try:
        async with keeper:
            with anyio.fail_after(4):
                result = await keeper.execute(ToolCall(call_id="c1", name="stuck"))
            record = await keeper.store.get_call("default", "c1")
    finally:
        unblock.set()
    assert result.status is CallStatus.UNKNOWN_OUTCOME
    assert result.error is not None and result.error.details == {"cause": ErrorCode.TIMEOUT}
    assert record is not None and record.status is CallStatus.UNKNOWN_OUTCOME


def _holding(keeper: Keeper, busy: anyio.Event, release: threading.Event) -> None:
    """Register `hold`: a sync write that takes a worker thread, sets `busy` and keeps the
    thread until `release` (at most 5 s)."""

    @keeper.tool(effect="write", timeout=10)
    def hold() -> str:
        anyio.from_thread.run_sync(busy.set)
        release.wait(5)
        return "done"


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_sync_tool_finding_no_thread_free_by_its_timeout_is_retryable_and_never_runs() -> (
    None
):
    """It waited for a thread and was recorded UNKNOWN_OUTCOME, though its function never ran."""
    busy, release, ran = anyio.Event(), threading.Event(), threading.Event()
    keeper = Keeper(principal=APP, ledger="memory://", tool_threads=1)

    _holding(keeper, busy, release)

    @keeper.tool(effect="write", timeout=0.1, retry=RetryPolicy(max_attempts=1))
    def pay() -> str:
        ran.set()
        return "paid"

    try:
        async with keeper, anyio.create_task_group() as tg:
            tg.start_soon(keeper.execute, ToolCall(call_id="h1", name="hold"))
            with anyio.fail_after(4):
                await busy.wait()
                result = await keeper.execute(ToolCall(call_id="p1", name="pay"))
            release.set()
        record = await keeper.store.get_call("default", "p1")
    finally:
        release.set()
    assert result.status is CallStatus.FAILED
    assert result.error is not None and result.error.code is ErrorCode.UPSTREAM_UNAVAILABLE
    assert result.error.retryable
    assert record is not None and record.status is CallStatus.FAILED
    assert record.error is not None and record.error["code"] == ErrorCode.UPSTREAM_UNAVAILABLE
    assert not ran.is_set()  # (not then, nor once the thread was free)


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_sync_tools_holding_every_thread_leave_the_applications_threads_free() -> None:
    """They took anyio's default threads: the application's own `to_thread` calls waited."""
    busy, release = anyio.Event(), threading.Event()
    keeper = Keeper(principal=APP, ledger="memory://")
    default = anyio.to_thread.current_default_thread_limiter()
    tokens = default.total_tokens
    default.total_tokens = 1  # (the test's run only; given back below)

    _holding(keeper, busy, release)

    try:
        async with keeper, anyio.create_task_group() as tg:
            tg.start_soon(keeper.execute, ToolCall(call_id="h1", name="hold"))
            with anyio.fail_after(4):
                await busy.wait()
                assert await anyio.to_thread.run_sync(lambda: "ours") == "ours"
            release.set()
    finally:
        release.set()
        default.total_tokens = tokens


def test_a_keeper_refuses_fewer_than_one_tool_thread() -> None:
    with pytest.raises(ConfigurationError):
        Keeper(principal=APP, ledger="memory://", tool_threads=0)


async def test_a_positional_only_parameter_left_out_before_one_given_takes_its_default() -> None:
    """Its default (math.inf) is no JSON, so nothing fills it in: the next argument took its
    place, and a call giving only floor=5 ran clamp(5, 1.0)."""
    keeper = Keeper(principal=APP, ledger="memory://")
    seen: list[tuple[float, float]] = []

    @keeper.tool(effect="read_only")
    def clamp(ceiling: float = math.inf, floor: float = 1.0, /) -> None:
        seen.append((ceiling, floor))

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="clamp", arguments={"floor": 5}))
    assert result.status is CallStatus.SUCCEEDED
    assert seen == [(math.inf, 5)]
