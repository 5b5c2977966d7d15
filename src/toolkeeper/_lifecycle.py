"""A keeper's lifecycle: NEW, then OPEN, then CLOSED, each step once.

What it is: the order of the steps and who waits for whom — concurrent openers wait for the
first, a close waits for the calls in flight, a second close (on any thread's event loop)
waits for the first. What it is not: what opening and closing do; the keeper passes those in.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

from ._in_flight import InFlight
from .core.errors import ConfigurationError

__all__ = ["KeeperState", "Lifecycle"]


class KeeperState(enum.Enum):
    """Lifecycle of a `Keeper`."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


class Lifecycle:
    """Where a keeper is in its lifecycle.

    Args:
        calls: The keeper's calls in flight, which `close` waits for.
    """

    def __init__(self, calls: InFlight) -> None:
        self.state = KeeperState.NEW
        self._calls = calls
        self._open_lock: anyio.Lock | None = None
        self._closed = threading.Event()
        """Set once `close` has run its closing steps."""

    @property
    def is_open(self) -> bool:
        """Whether `open` has run and `close` has not started."""
        return self.state is KeeperState.OPEN

    @property
    def is_closed(self) -> bool:
        """Whether `close` has started (new opens are refused)."""
        return self.state is KeeperState.CLOSED

    async def open(self, opening: Callable[[], Awaitable[None]]) -> None:
        """Run `opening` once, unless open already: concurrent callers wait for the first.

        Raises:
            ConfigurationError: closed, before `opening` or while it ran.
        """
        if self.is_open:
            return
        if self._open_lock is None:
            self._open_lock = anyio.Lock()
        async with self._open_lock:
            if self.is_open:  # (read again: another task may have opened it)
                return
            if self.is_closed:
                raise ConfigurationError("this Keeper is closed")
            await opening()
            if self.is_closed:  # closed while it was opening
                raise ConfigurationError("this Keeper is closed")
            self.state = KeeperState.OPEN

    async def close(
        self, closing: Callable[[], Awaitable[None]], *, busy: Callable[[], None]
    ) -> None:
        """Refuse new opens, wait for the calls in flight (`busy` is called first when there
        are any), then run `closing`, shielded from cancellation. Idempotent: a close made
        while another is closing returns when that one has."""
        if self.is_closed:
            if not self._closed.is_set():  # (it may close on another thread's event loop)
                await anyio.to_thread.run_sync(self._closed.wait, abandon_on_cancel=True)
            return
        self.state = KeeperState.CLOSED
        try:
            await self._calls.until_none(busy)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await closing()
                finally:
                    self._closed.set()
