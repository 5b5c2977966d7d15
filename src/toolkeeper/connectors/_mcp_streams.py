"""A transport wrapper that tells when an MCP connection has ended.

The SDK's client session answers pending requests with CONNECTION_CLOSED once its read stream
ends, but offers no way to *wait* for that end, nor to ask before sending. `WatchedTransport`
wraps any transport (stdio, streamable HTTP) and marks itself closed when the server's side of
the read stream ends, so the connector can refuse a call it cannot send (nothing ran) and the
supervisor can reconnect at once.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio

__all__ = ["WatchedTransport"]


class _WatchedReadStream:
    """Forwards a read stream and reports its end to the owning transport."""

    def __init__(self, inner: Any, owner: WatchedTransport) -> None:
        self._inner = inner
        self._owner = owner

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._owner.mark_closed()
            raise

    async def aclose(self) -> None:
        self._owner.mark_closed()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class WatchedTransport:
    """An MCP client transport (async context manager of a stream pair) that knows when the
    connection has ended."""

    def __init__(self, inner: Any, on_close: Callable[[], None] | None = None) -> None:
        self._inner = inner
        self._closed = anyio.Event()
        self._on_close = on_close

    @property
    def closed(self) -> bool:
        """True once the server's side of the connection has ended."""
        return self._closed.is_set()

    def mark_closed(self) -> None:
        """Record that the connection has ended (and tell the owner, once)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._on_close is not None:
            self._on_close()

    async def wait_closed(self) -> None:
        """Wait until the connection has ended."""
        await self._closed.wait()

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._inner.__aenter__()
        return _WatchedReadStream(read, self), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        self.mark_closed()
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result
