"""The shared rate limiter against the real Redis server."""

import os
import uuid

import pytest

pytestmark = pytest.mark.anyio

REDIS_URL = os.environ.get("TOOLKEEPER_TEST_REDIS", "redis://127.0.0.1:6379/0")


@pytest.fixture
async def limiters() -> object:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.exceptions.ConnectionError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis is not reachable at {REDIS_URL}")
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    from toolkeeper.policy.redis_limiter import RedisRateLimiter

    prefix = f"tk-test:{uuid.uuid4().hex}:"
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
