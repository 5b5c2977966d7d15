"""The calls in flight that a closing keeper waits for.

Calls may start and end on another thread's event loop (`execute_sync`'s) than the one that
waits for them, so they are counted without a lock, by a list's append and pop (each atomic;
a lock costs a call more), and the waiter is woken on its own event loop.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
from anyio.lowlevel import EventLoopToken, current_token

__all__ = ["InFlight"]


class InFlight:
    """A count of calls in flight, and a wait until there are none.

    A call is counted from `enter()` to `exit()` (in a `finally`), on any thread.
    `until_none` returns once no call is counted; one task at a time may wait.
    """

    __slots__ = ("_calls", "_waker")

    def __init__(self) -> None:
        self._calls: list[None] = []
        # What wakes the waiting task: its event, and the event loop and thread it waits on
        # (the last call may end on another). One slot, taken by an atomic pop: `until_none`
        # fills it before it looks at `_calls`, and the call that empties `_calls` takes it
        # after, so whichever of the two takes it decides whether the task waits, and no call
        # wakes a task that does not wait.
        self._waker: list[tuple[anyio.Event, EventLoopToken, int]] = []

    def enter(self) -> None:
        """Count one call more."""
        self._calls.append(None)

    def exit(self) -> None:
        """Count one call less: the last one wakes the task `until_none` keeps waiting."""
        self._calls.pop()
        if self._calls or not self._waker:
            return
        try:
            event, loop, thread = self._waker.pop()
        except IndexError:  # (the waiting task, or another call ending, took it first)
            return
        if threading.get_ident() == thread:
            event.set()
        else:  # (an anyio event is set on its own event loop)
            with contextlib.suppress(Exception):  # (that loop is gone: no one waits)
                anyio.from_thread.run_sync(event.set, token=loop)

    async def until_none(self, busy: Callable[[], None]) -> None:
        """Return once no call is in flight; `busy` is called first when one is (what makes
        the calls end sooner). Cancelled, it returns once no ending call can be waking it."""
        idle = anyio.Event()
        self._waker.append((idle, current_token(), threading.get_ident()))
        try:
            if self._calls:
                busy()
                await idle.wait()
        finally:
            # Taken back unless a call took it (none was in flight, or the wait was cut short):
            # one ending later would wake a loop no one waits on, and block for ever if that
            # loop has stopped.
            try:
                self._waker.pop()
            except IndexError:  # the last call, ending just now, took it: it wakes us
                with anyio.CancelScope(shield=True):
                    await idle.wait()
