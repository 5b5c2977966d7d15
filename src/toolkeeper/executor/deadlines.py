"""Attempt deadlines: each attempt runs in its own cancel scope, cancelled at its deadline.

`Deadlines.watch` puts the deadline on the scope itself (anyio's timer, one per scope).
On asyncio, `Keeper.open` binds `LoopDeadlines` instead: one timer per thread's event loop
for every attempt in flight there, armed at the earliest deadline, which cancels the scopes
whose deadline has passed and arms itself at the next. A timed anyio scope costs a timer
handle on the loop's heap and a look-up of the running loop per attempt (on Python 3.11,
each asks the kernel for the process id); here an attempt costs a dict entry, and the timer
is armed again only when an attempt's deadline comes before the one it waits for.

Either way an attempt's scope is cancelled once its deadline has passed, on the event
loop's clock, and each attempt (a retry too) has a deadline of its own.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import TypeAlias

import anyio

__all__ = ["Deadlines", "LoopDeadlines", "Watched"]

Watched: TypeAlias = dict[anyio.CancelScope, float]
"""The scopes of the attempts in flight that a timer watches, each with its deadline: what
`Deadlines.watch` returns and `let_go` takes."""

_NOT_WATCHED: Watched = {}
"""Where an attempt nothing watches is (its scope has its own deadline, or was cancelled at
once): never written."""


class Deadlines:
    """Cancels each attempt's scope at its deadline (any anyio backend)."""

    def watch(self, scope: anyio.CancelScope, deadline: float) -> Watched:
        """Cancel `scope` (entered) at `deadline` (the event loop's clock) unless it is let
        go first; returns where it is watched, for `let_go`."""
        scope.deadline = deadline
        return _NOT_WATCHED

    def let_go(self, watched: Watched, scope: anyio.CancelScope) -> None:
        """The attempt of `scope` ended: its deadline no longer applies."""
        watched.pop(scope, None)


class _Timer:
    """The timer of one thread's asyncio event loop, and the attempts it watches."""

    __slots__ = ("at", "handle", "loop", "watched")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.at = math.inf
        """When the timer fires; infinity: it is not armed."""
        self.handle: asyncio.TimerHandle | None = None
        self.watched: Watched = {}


class LoopDeadlines(Deadlines):
    """Deadlines on asyncio: one timer per thread's event loop (see the module)."""

    def __init__(self) -> None:
        self._timers: dict[int, _Timer] = {}

    def watch(self, scope: anyio.CancelScope, deadline: float) -> Watched:
        timer = self._timers.get(threading.get_ident())
        if timer is None or not timer.loop.is_running():
            timer = self._timer()
        if deadline < timer.at:
            if deadline <= time.monotonic():  # (asyncio's clock, as `event_loop_clock` says)
                scope.cancel()
                return _NOT_WATCHED
            self._arm(timer, deadline)
        timer.watched[scope] = deadline
        return timer.watched

    def _timer(self) -> _Timer:
        """A timer on the running loop of this thread (a loop that stopped leaves its own,
        and what it watched, behind)."""
        old = self._timers.get(threading.get_ident())
        if old is not None and old.handle is not None:
            old.handle.cancel()
        timer = self._timers[threading.get_ident()] = _Timer(asyncio.get_running_loop())
        return timer

    def _arm(self, timer: _Timer, at: float) -> None:
        if timer.handle is not None:
            timer.handle.cancel()
        timer.at = at
        timer.handle = timer.loop.call_at(at, self._fire, timer)

    def _fire(self, timer: _Timer) -> None:
        """Cancel the attempts whose deadline has passed; arm the timer at the next one."""
        timer.handle = None
        timer.at = math.inf
        now = time.monotonic()
        following = math.inf
        overdue: list[anyio.CancelScope] = []
        for scope, deadline in timer.watched.items():
            if deadline <= now:
                overdue.append(scope)
            elif deadline < following:
                following = deadline
        for scope in overdue:
            del timer.watched[scope]
            scope.cancel()
        if following < math.inf:
            self._arm(timer, following)
