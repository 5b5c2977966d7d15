"""The shared rate limiter against the real Redis server."""

import math
import uuid

import pytest

from ..conftest import APP, redis_url

pytestmark = pytest.mark.anyio

REDIS_URL = redis_url()


@pytest.fixture
def server(redis_server: object) -> object:
    """A client of the real Redis server (the test is skipped, or fails on CI, without one)."""
    return redis_server


@pytest.fixture
def prefix(server: object) -> object:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    prefix = f"tk-test:{uuid.uuid4().hex}:"
    yield prefix
    for key in server.scan_iter(prefix + "*"):  # type: ignore[attr-defined]
        server.delete(key)  # type: ignore[attr-defined]


@pytest.fixture
async def limiters(prefix: str) -> object:
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    pair = (RedisRateLimiter(REDIS_URL, prefix=prefix), RedisRateLimiter(REDIS_URL, prefix=prefix))
    yield pair
    for limiter in pair:
        await limiter.aclose()


async def test_two_processes_share_one_bucket(limiters: object) -> None:
    a, b = limiters  # type: ignore[misc]
    assert await a.acquire("ann", per_minute=6, burst=2) is None
    assert await b.acquire("ann", per_minute=6, burst=2) is None
    wait = await a.acquire("ann", per_minute=6, burst=2)
    assert wait is not None and 9.0 < wait <= 10.0
    assert await b.acquire("bob", per_minute=6, burst=2) is None


async def test_a_clock_stepping_back_does_not_lock_a_principal_out(
    limiters: object, server: object, prefix: str
) -> None:
    """Redis' clock is the only clock, but it can step back (a failover to a replica whose
    clock is behind, an NTP step): the bucket was then last touched "in the future". The
    negative elapsed time drained the bucket, and the principal was told to wait an hour."""
    a, _ = limiters  # type: ignore[misc]
    seconds, micros = server.time()  # type: ignore[attr-defined]
    server.hset(  # type: ignore[attr-defined]
        prefix + "ann", mapping={"tokens": 2, "at": seconds + micros / 1e6 + 3600}
    )
    assert await a.acquire("ann", per_minute=6, burst=2) is None
    assert await a.acquire("ann", per_minute=6, burst=2) is None
    wait = await a.acquire("ann", per_minute=6, burst=2)
    assert wait is not None and 9.0 < wait <= 10.0


async def test_a_connection_the_server_closed_is_reopened_not_refused(
    server: object, prefix: str
) -> None:
    """Redis closes idle clients (its `timeout`, a proxy's, a restart): the next call on
    that pooled connection was refused as RATE_LIMITED, 'could not be reached', while the
    server was up."""
    from toolkeeper import Keeper, ToolCall
    from toolkeeper.policy.budgets import Budgets
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    name = prefix.replace(":", "-").rstrip("-")
    url = f"{REDIS_URL}{'&' if '?' in REDIS_URL else '?'}client_name={name}"
    limiter = RedisRateLimiter(url, prefix=prefix)
    keeper = Keeper(
        principal=APP,
        ledger="memory://",
        budgets=Budgets(calls_per_minute=60),
        rate_limiter=limiter,
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    async with keeper:
        assert (await keeper.execute(ToolCall(call_id="c1", name="ping"))).ok
        ours = [c["id"] for c in server.client_list() if c["name"] == name]  # type: ignore[attr-defined]
        assert ours
        for client_id in ours:
            server.client_kill_filter(_id=client_id)  # type: ignore[attr-defined]
        second = await keeper.execute(ToolCall(call_id="c2", name="ping"))
    await limiter.aclose()
    assert second.ok, second.error


async def test_an_unreachable_limiter_refuses_the_call_and_records_it() -> None:
    pytest.importorskip("redis")
    from toolkeeper import CallStatus, ErrorCode, Keeper, ToolCall
    from toolkeeper.policy.budgets import Budgets
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    ran: list[bool] = []
    keeper = Keeper(
        principal=APP,
        ledger="memory://",
        budgets=Budgets(calls_per_minute=60),
        rate_limiter=RedisRateLimiter("redis://127.0.0.1:1/0"),  # nothing listens on port 1
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        ran.append(True)
        return "pong"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="ping", arguments={}))
        [record] = await keeper.store.list_calls()
    assert result.error is not None and result.error.code is ErrorCode.RATE_LIMITED
    assert result.error.retryable and "could not be reached" in result.error.message
    assert "127.0.0.1" not in result.error.message  # nothing about the deployment leaks
    assert record.status is CallStatus.REJECTED
    assert ran == []


async def test_a_redis_that_does_not_answer_is_waited_for_only_the_timeout() -> None:
    """A server that takes the connection and never answers (a stalled Redis, a proxy that
    lost its other side) held the call for ever with redis-py releases before 8.0, whose
    default was no timeout: the limiter sets its own."""
    import anyio
    import redis.exceptions

    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    async def silent(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            while await stream.receive():
                pass  # never a reply

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, silent)
        limiter = RedisRateLimiter(f"redis://127.0.0.1:{port}/0", timeout=0.2)
        with anyio.fail_after(3), pytest.raises(redis.exceptions.TimeoutError):
            await limiter.acquire("ann", per_minute=6, burst=2)
        await limiter.aclose()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), True])
def test_a_timeout_that_is_not_a_positive_number_is_refused(timeout: float) -> None:
    """`timeout=0` (read as "no timeout") timed every command out at once: every call was
    refused as RATE_LIMITED, "could not be reached", with Redis up; NaN and infinity waited
    for ever on a Redis that did not answer, and NaN failed `aclose`."""
    pytest.importorskip("redis")
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    with pytest.raises(ValueError, match="timeout"):
        RedisRateLimiter(REDIS_URL, timeout=timeout)


@pytest.mark.parametrize(("per_minute", "burst"), [(0, 1), (1e-300, 10), (60, 10**17)])
async def test_a_bucket_that_takes_ages_to_fill_up_still_grants_its_burst(
    limiters: object, per_minute: float, burst: int
) -> None:
    """The key was set to expire once its bucket is full again, in seconds written as Lua
    writes a number: a rate of 0 (as the in-process limiter takes it), a tiny one or a huge
    burst made that "inf" or "1e+300", which EXPIRE refuses, so every call was refused as
    RATE_LIMITED, "could not be reached"."""
    a, _ = limiters  # type: ignore[misc]
    assert await a.acquire("ann", per_minute=per_minute, burst=burst) is None
    if burst == 1:
        assert await a.acquire("ann", per_minute=per_minute, burst=burst) == math.inf


@pytest.mark.parametrize(
    "query",
    ["socket_timeout=0", "socket_connect_timeout=-1", "socket_timout=1", "ssl_cert_reqs=none"],
)
def test_a_url_that_sets_what_no_connection_takes_is_refused_when_built(query: str) -> None:
    """redis-py reads a URL's settings only when it first connects: a zero timeout in the
    URL (which takes precedence over `timeout`), a misspelt setting or an `ssl_*` one on
    redis:// made every call refused as RATE_LIMITED, "could not be reached", with Redis up."""
    pytest.importorskip("redis")
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    with pytest.raises(ValueError, match="Redis URL") as refused:
        RedisRateLimiter(f"redis://:hunter2@127.0.0.1:6379/0?{query}")
    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_calls_are_refused_and_the_log_says_why(
    server: object, caplog: pytest.LogCaptureFixture
) -> None:
    """redis-py's client is asyncio's: on trio every call was refused as if Redis could not
    be reached, and the log said only 'no running event loop'."""
    from toolkeeper import Budgets, Keeper, ToolCall
    from toolkeeper.core.errors import ErrorCode
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    limiter = RedisRateLimiter(REDIS_URL, prefix=f"tk:test:{uuid.uuid4().hex}:")
    keeper = Keeper(
        principal=APP,
        ledger="memory://",
        budgets=Budgets(calls_per_minute=60),
        rate_limiter=limiter,
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    async with keeper:
        refused = await keeper.execute(ToolCall(call_id="c1", name="ping"))
    assert refused.error is not None and refused.error.code is ErrorCode.RATE_LIMITED
    assert "asyncio only" in caplog.text


async def test_two_processes_share_one_window(limiters: object) -> None:
    """Without a burst, at most `calls_per_minute` calls in any minute, across processes."""
    a, b = limiters  # type: ignore[misc]
    assert await a.acquire("ann", per_minute=2, burst=None) is None
    assert await b.acquire("ann", per_minute=2, burst=None) is None
    wait = await a.acquire("ann", per_minute=2, burst=None)
    assert wait is not None and 59.0 < wait <= 60.0
    assert await b.acquire("ann", per_minute=2, burst=None) is not None
    assert await b.acquire("bob", per_minute=2, burst=None) is None


async def test_a_clock_stepping_back_does_not_lock_a_window_out(
    limiters: object, server: object, prefix: str
) -> None:
    a, _ = limiters  # type: ignore[misc]
    seconds, micros = server.time()  # type: ignore[attr-defined]
    server.zadd(prefix + "w:ann", {"ahead": seconds + micros / 1e6 + 3600})  # type: ignore[attr-defined]
    wait = await a.acquire("ann", per_minute=1, burst=None)
    assert wait is not None and 59.0 < wait <= 60.0
