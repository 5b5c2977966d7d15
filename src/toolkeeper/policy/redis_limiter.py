"""A rate limiter shared by every gateway process: windows and token buckets in Redis.

One Lua script counts a call in a window (a sorted set of the calls of the last minute), or
refills and takes a token, atomically, so several processes (or hosts) that
serve the same principal share one bucket. Needs the `redis` extra:
`pip install "toolkeeper[redis]"`.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from typing import Any

from ..core.extras import MissingExtra
from ..core.values import is_positive
from .budgets import window_of

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtra("redis", "the Redis rate limiter") from exc

__all__ = ["RedisRateLimiter"]

# KEYS[1] bucket; ARGV: rate per second, burst, now (seconds, from Redis' own clock below)
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or burst
local at = tonumber(b[2]) or now
-- a clock that stepped back (a failover to a host behind) refills nothing, takes nothing
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = -1
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'at', now)
-- in whole seconds, written out: at a rate of 0, a tiny one or a huge burst, Lua writes the
-- time to fill up as 'inf' or '1e+300', which EXPIRE refuses (a cap of 30 million years)
redis.call('EXPIRE', KEYS[1], string.format('%d', math.min(math.ceil(burst / rate) + 1, 1e15)))
return tostring(wait)
"""


# KEYS[1] window (a sorted set of calls, scored by when they went); ARGV: at most this many
# calls, in any this many seconds, a name for this call
_WINDOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local limit = tonumber(ARGV[1])
local seconds = tonumber(ARGV[2])
local stamp = string.format('%.6f', now)
-- a clock that stepped back: calls "to come" count as made now
local ahead = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. stamp, '+inf')
for _, call in ipairs(ahead) do redis.call('ZADD', KEYS[1], stamp, call) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now - seconds))
local n = redis.call('ZCARD', KEYS[1])
local wait = -1
if n >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
  wait = tonumber(oldest[2]) + seconds - now
else
  redis.call('ZADD', KEYS[1], stamp, ARGV[3])
end
redis.call('EXPIRE', KEYS[1], string.format('%d', math.min(math.ceil(seconds) + 1, 1e15)))
return tostring(wait)
"""


def _check_settings(pool: Any) -> None:
    """Refuse what the URL sets wrongly now: redis-py would only fail on the first command,
    and every call would then be refused as if Redis could not be reached."""
    for name in ("socket_timeout", "socket_connect_timeout"):
        if not is_positive(pool.connection_kwargs.get(name)):
            raise ValueError(f"the Redis URL's {name} must be a positive number of seconds")
    try:
        pool.make_connection()  # (builds a connection object; connects nothing)
    except TypeError as exc:  # a parameter no connection takes: a typo, `ssl_*` on redis://
        raise ValueError(f"the Redis URL holds a setting redis-py does not take: {exc}") from exc


class RedisRateLimiter:
    """Token buckets in Redis, keyed `{prefix}{principal}`; Redis' clock is the only clock.

    Args:
        url: Redis URL, e.g. `redis://127.0.0.1:6379/0`. Its own `socket_timeout` and
            `socket_connect_timeout` query parameters take precedence over `timeout`.
        prefix: Key prefix, so that several deployments can share one Redis.
        timeout: Seconds to wait for Redis to connect, then to answer: a Redis that does
            not answer refuses the call (`RATE_LIMITED`, retryable) instead of holding it.
            Set here, not left to redis-py, whose default was no timeout before its 8.0
            release (the extra takes `redis>=5`).

    It runs on asyncio only (redis-py's client is asyncio's): on trio, every call is refused
    (`RATE_LIMITED`, fail closed), and the log says why.

    Raises:
        ValueError: `timeout` (or the URL's own) is not a positive number of seconds, or
            `url` is not a Redis URL or holds a setting redis-py does not take.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "tk:rl:",
        timeout: float = 5.0,
    ) -> None:
        if not is_positive(timeout):
            raise ValueError("RedisRateLimiter.timeout must be a positive number of seconds")
        # A pooled connection the server closed (its idle `timeout`, a proxy's, a restart or
        # failover) fails the next command sent on it: that one is sent again on a new
        # connection. A timeout is not: a server that does not answer is not waited for twice.
        # (Sent again after a reply was lost, a script takes a second token: it errs towards
        # refusing, never towards running unlimited.)
        self._client: Any = aioredis.from_url(
            url,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        _check_settings(self._client.connection_pool)
        self._script: Any = self._client.register_script(_TAKE)
        self._window: Any = self._client.register_script(_WINDOW)
        self._prefix = prefix

    async def acquire(self, key: str, *, per_minute: float, burst: int | None) -> float | None:
        """Count a call for `key`: in a window of `window_of(per_minute)` calls (`burst`
        None) or a token bucket of `burst` tokens; None when it may go, else seconds until
        one may.

        Raises:
            RuntimeError: The event loop is not asyncio's (redis-py's client is asyncio's).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # (the executor refuses the call, as for a Redis it cannot reach, and logs this)
            raise RuntimeError(
                "RedisRateLimiter runs on asyncio only (redis.asyncio), not on this event loop"
            ) from None
        if burst is None:
            limit, seconds = window_of(per_minute)
            if limit == 0:
                return math.inf
            raw = await self._window(
                keys=[f"{self._prefix}w:{key}"], args=[limit, seconds, secrets.token_hex(8)]
            )
        else:
            raw = await self._script(keys=[self._prefix + key], args=[per_minute / 60.0, burst])
        wait = float(raw.decode() if isinstance(raw, bytes) else raw)
        return None if wait < 0 else wait

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._client.aclose()
