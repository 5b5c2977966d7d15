import math
import time

import anyio.lowlevel
import pytest

from toolkeeper import Budgets, CallStatus, ErrorCode, Keeper, Principal, ToolCall
from toolkeeper.ledger.base import BudgetHold
from toolkeeper.policy.budgets import COUNTED_STATUSES, MemoryRateLimiter
from toolkeeper.testing import FakeClock, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


async def test_task_and_tool_budgets_are_enforced_before_running() -> None:
    ran: list[int] = []
    keeper = Keeper(
        principal=APP,
        ledger=MemoryStore(),
        budgets=Budgets(max_calls_per_task=3, max_calls_per_tool_per_task=2),
    )

    @keeper.tool(effect="read_only")
    async def ping(n: int) -> int:
        ran.append(n)
        return n

    @keeper.tool(effect="read_only")
    async def pong() -> str:
        return "pong"

    async with keeper:
        r = [
            await keeper.execute(ToolCall(call_id=f"c{i}", name="ping", arguments={"n": i}))
            for i in range(3)
        ]
        assert [x.status for x in r] == [CallStatus.SUCCEEDED] * 2 + [CallStatus.REJECTED]
        assert r[2].error is not None and r[2].error.code is ErrorCode.BUDGET_EXCEEDED
        assert r[2].error.details["budget"] == "calls_per_tool_per_task"
        assert (await keeper.execute(ToolCall(call_id="p1", name="pong"))).ok
        over = await keeper.execute(ToolCall(call_id="p2", name="pong"))
        assert over.error is not None and over.error.details["budget"] == "calls_per_task"
        other_task = await keeper.execute(
            ToolCall(call_id="c9", name="ping", arguments={"n": 9}, task_id="t2")
        )
        assert other_task.ok
    assert ran == [0, 1, 9]


async def test_rate_limit_says_when_to_retry() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    keeper = Keeper(
        principal=APP,
        ledger=MemoryStore(),
        budgets=Budgets(calls_per_minute=60, burst=2),
        rate_limiter=limiter,
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    async with keeper:
        assert (await keeper.execute(ToolCall(call_id="1", name="ping"))).ok
        assert (await keeper.execute(ToolCall(call_id="2", name="ping"))).ok
        limited = await keeper.execute(ToolCall(call_id="3", name="ping"))
        assert limited.error is not None and limited.error.code is ErrorCode.RATE_LIMITED
        assert limited.error.retryable and limited.error.retry_after == pytest.approx(1.0)
        clock.advance(1.0)
        again = await keeper.execute(ToolCall(call_id="3", name="ping"))
        assert again.ok


async def test_a_call_proposed_again_after_its_retry_after_is_not_refused_again() -> None:
    """`retry_after` was the wait rounded to the nearest millisecond, so down as often as up:
    0.5004 s said 0.5, and a client that waited exactly that was refused a second time."""
    clock = FakeClock()
    keeper = Keeper(
        principal=APP,
        ledger=MemoryStore(),
        budgets=Budgets(calls_per_minute=60, burst=1),
        rate_limiter=MemoryRateLimiter(clock=clock),
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    async with keeper:
        assert (await keeper.execute(ToolCall(call_id="1", name="ping"))).ok
        clock.advance(0.4996)
        limited = await keeper.execute(ToolCall(call_id="2", name="ping"))
        assert limited.error is not None and limited.error.retry_after is not None
        # The text says the same wait: "retry in 0.0 s" told a model to retry at once.
        assert f"retry in {limited.error.retry_after:g} s" in limited.error.message
        clock.advance(limited.error.retry_after)
        again = await keeper.execute(ToolCall(call_id="2", name="ping"))
    assert again.ok, again.error


@pytest.mark.parametrize("effect", ["read_only", "write"])
@pytest.mark.parametrize("ledger", ["memory", "sqlite"])
async def test_concurrent_calls_cannot_all_pass_the_budget(
    tmp_path: object, effect: str, ledger: str
) -> None:
    ran: list[int] = []
    url = "memory://" if ledger == "memory" else f"sqlite:///{tmp_path}/l.db"
    keeper = Keeper(
        principal=APP,
        ledger=url,
        budgets=Budgets(max_calls_per_task=3, max_calls_per_tool_per_task=2),
    )

    @keeper.tool(effect=effect, permissions=[])  # type: ignore[arg-type]
    async def fetch(n: int) -> int:
        await anyio.lowlevel.checkpoint()
        ran.append(n)
        return n

    @keeper.tool(effect="read_only")
    async def other(n: int) -> int:
        return n

    calls = [ToolCall(call_id=f"f{i}", name="fetch", arguments={"n": i}) for i in range(6)]
    calls += [ToolCall(call_id=f"o{i}", name="other", arguments={"n": i}) for i in range(3)]
    async with keeper:
        results = await keeper.execute_many(calls)
        # Every refused call's place came back: the 3 that ran are all the task has used.
        now = time.time()
        probe = BudgetHold(
            tenant="default",
            task_id="default",
            call_id="probe",
            tool="other",
            limits=((None, 4),),
            counted=COUNTED_STATUSES,
            created_at=now,
            expires_at=now + 60,
        )
        room = await keeper.store.hold_budget(probe)
    ok = [r for r in results if r.ok]
    # Never more than the task's 3, never more than fetch's 2 (write calls of one tool run
    # one at a time, so the read-only others may take the task's places first).
    assert len(ok) == 3
    assert len(ran) == len([r for r in ok if r.tool == "fetch"]) <= 2
    refused = [r for r in results if not r.ok]
    assert all(r.error is not None and r.error.code is ErrorCode.BUDGET_EXCEEDED for r in refused)
    assert room is None


async def test_a_clock_stepping_back_does_not_lock_a_principal_out() -> None:
    """Time that ran backwards drained the bucket: an hour back, a full bucket said to wait
    an hour (a `Keeper(clock=...)` wall clock drives this limiter, and wall clocks step)."""
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    assert await limiter.acquire("ann", per_minute=6, burst=2) is None
    clock.advance(-3600)
    assert await limiter.acquire("ann", per_minute=6, burst=2) is None
    wait = await limiter.acquire("ann", per_minute=6, burst=2)
    assert wait == pytest.approx(10.0)


async def test_the_memory_limiter_forgets_buckets_that_filled_up_again() -> None:
    """It kept a bucket for every principal it had ever seen, for ever (100,000 principals:
    100,000 buckets an hour later), where Redis lets its keys expire."""
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    for n in range(3000):
        assert await limiter.acquire(f"old-{n}", per_minute=60, burst=10) is None
    clock.advance(10)  # the old buckets are full again: as good as none
    for _ in range(10):
        assert await limiter.acquire("busy", per_minute=60, burst=10) is None
    for n in range(3000):
        assert await limiter.acquire(f"new-{n}", per_minute=60, burst=10) is None
    assert len(limiter._buckets) == 3001  # the new ones and "busy"
    assert await limiter.acquire("busy", per_minute=60, burst=10) == pytest.approx(1.0)


async def test_a_bucket_with_no_refill_grants_its_burst_then_says_never() -> None:
    """The limiter is a public Protocol: a rate of 0 per minute grants the burst, then waits
    for ever (it divided by the rate and raised ZeroDivisionError)."""
    limiter = MemoryRateLimiter(clock=FakeClock())
    assert await limiter.acquire("ann", per_minute=0, burst=1) is None
    assert await limiter.acquire("ann", per_minute=0, burst=1) == math.inf


async def test_tenants_have_budgets_and_rate_limits_of_their_own() -> None:
    """Calls name no task by default ("default"): another tenant's calls used up this one's
    task budget, and a principal id shared across tenants one token bucket."""
    clock = FakeClock()
    keeper = Keeper(
        principal=APP,
        ledger=MemoryStore(),
        budgets=Budgets(max_calls_per_task=2, calls_per_minute=1, burst=1),
        rate_limiter=MemoryRateLimiter(clock=clock),
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    acme = Principal(id="bot", tenant="acme")
    globex = Principal(id="bot", tenant="globex")
    async with keeper:
        first = await keeper.execute(ToolCall(call_id="a1", name="ping", principal=acme))
        limited = await keeper.execute(ToolCall(call_id="a2", name="ping", principal=acme))
        other = await keeper.execute(ToolCall(call_id="g1", name="ping", principal=globex))
        clock.advance(60)
        second = await keeper.execute(ToolCall(call_id="a3", name="ping", principal=acme))
        clock.advance(60)
        over = await keeper.execute(ToolCall(call_id="a4", name="ping", principal=acme))
    assert first.ok and other.ok and second.ok
    assert limited.error is not None and limited.error.code is ErrorCode.RATE_LIMITED
    assert over.error is not None and over.error.code is ErrorCode.BUDGET_EXCEEDED


@pytest.mark.parametrize(
    "bad",
    [
        {"max_calls_per_task": -1},
        {"max_calls_per_tool_per_task": 1.5},
        {"per_tool": {"x": -2}},
        {"calls_per_minute": 0},
        {"calls_per_minute": float("inf")},
        {"calls_per_minute": True},  # (a flag, not one call a minute)
        {"burst": 0},
    ],
)
def test_budgets_out_of_range_are_refused(bad: dict[str, object]) -> None:
    """`calls_per_minute=0` refused every call on Redis and allowed a burst in memory."""
    with pytest.raises(ValueError, match="Budgets"):
        Budgets(**bad)  # type: ignore[arg-type]


async def test_the_keepers_fake_clock_drives_its_rate_limits() -> None:
    clock = FakeClock()
    keeper = Keeper(
        principal=APP,
        ledger=MemoryStore(),
        budgets=Budgets(calls_per_minute=60, burst=1),
        clock=clock,
        sleep=clock.sleep,
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    async with keeper:
        assert (await keeper.execute(ToolCall(call_id="1", name="ping"))).ok
        limited = await keeper.execute(ToolCall(call_id="2", name="ping"))
        clock.advance(3600)
        later = await keeper.execute(ToolCall(call_id="3", name="ping"))
    assert limited.error is not None and limited.error.code is ErrorCode.RATE_LIMITED
    assert later.ok


async def test_calls_per_minute_alone_lets_at_most_that_many_calls_in_any_minute() -> None:
    """`Budgets(calls_per_minute=2)` let 4 calls through at once: a hidden burst of 10."""
    clock = FakeClock()
    keeper = Keeper(
        principal=APP,
        ledger=MemoryStore(),
        budgets=Budgets(calls_per_minute=2),
        rate_limiter=MemoryRateLimiter(clock=clock),
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    async def call(n: int) -> float | None:
        result = await keeper.execute(ToolCall(call_id=f"c{n}", name="ping"))
        if result.ok:
            return None
        assert result.error is not None and result.error.code is ErrorCode.RATE_LIMITED
        return result.error.retry_after

    async with keeper:
        assert [await call(1), await call(2)] == [None, None]  # both at once
        assert await call(3) == pytest.approx(60.0)
        clock.advance(59.9)
        assert await call(4) == pytest.approx(0.1)
        clock.advance(0.1)  # the first two are a minute old
        assert [await call(5), await call(6)] == [None, None]
        clock.advance(30)
        assert await call(7) == pytest.approx(30.0)


async def test_a_rate_under_one_a_minute_lets_one_call_per_its_period() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    assert await limiter.acquire("ann", per_minute=0.5, burst=None) is None
    assert await limiter.acquire("ann", per_minute=0.5, burst=None) == pytest.approx(120.0)
    clock.advance(120)
    assert await limiter.acquire("ann", per_minute=0.5, burst=None) is None


async def test_an_explicit_burst_is_a_token_bucket() -> None:
    """`burst=B`: B calls at once, then the rate; up to B + N in the first minute."""
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    let = [await limiter.acquire("ann", per_minute=2, burst=3) for _ in range(4)]
    assert let[:3] == [None] * 3 and let[3] == pytest.approx(30.0)
    clock.advance(59.9)
    assert await limiter.acquire("ann", per_minute=2, burst=3) is None  # 4 in one minute
    assert await limiter.acquire("ann", per_minute=2, burst=3) is not None


async def test_a_clock_stepping_back_does_not_lock_a_window_out() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    assert await limiter.acquire("ann", per_minute=1, burst=None) is None
    clock.advance(-3600)
    assert await limiter.acquire("ann", per_minute=1, burst=None) == pytest.approx(60.0)
    clock.advance(60)
    assert await limiter.acquire("ann", per_minute=1, burst=None) is None


async def test_the_memory_limiter_forgets_windows_whose_calls_are_past() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    for n in range(3000):
        assert await limiter.acquire(f"old-{n}", per_minute=1, burst=None) is None
    clock.advance(60)
    for n in range(3000):
        assert await limiter.acquire(f"new-{n}", per_minute=1, burst=None) is None
    assert len(limiter._windows) <= 3000
