"""The event loop behind the `*_sync` facade: what `Keeper.execute_sync` runs its calls on.

What it is: one event loop per keeper, on a daemon thread, started by the first blocking call
and stopped by `close_sync`, or at exit for a keeper never closed. What it is not: a way to
call from a thread that runs an event loop already (`no_running_loop` refuses that).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.from_thread
import sniffio

from .core._exit import AtExit

# Imported before `_unclosed` is made, so that their exit handlers run after its own: a keeper
# closed at exit still commits its SQLite batch and writes its audit file.
from .ledger import _group_commit as _group_commit
from .observe import audit as audit

__all__ = ["SyncPortal", "no_running_loop"]


class SyncPortal:
    """A daemon thread's event loop for one owner's blocking calls, started on first use.

    Args:
        aclose: Closes the owner; awaited on that loop by `close` (and at exit, for a portal
            no one closed) before the loop stops.
    """

    def __init__(self, aclose: Callable[[], Awaitable[None]]) -> None:
        self._aclose = aclose
        self._lock = threading.Lock()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._stop: Callable[[], None] | None = None

    @property
    def started(self) -> bool:
        """Whether the loop runs (a blocking call started it and `close` has not stopped it)."""
        return self._portal is not None

    def portal(self) -> anyio.from_thread.BlockingPortal:
        """The loop's portal, the loop started first if it is not running."""
        with self._lock:  # threads calling at once share one loop
            if self._portal is None:
                self._portal, self._stop = _daemon_portal()
                _unclosed.add(self)
            return self._portal

    def close(self) -> None:
        """Close the owner on the loop, then stop the loop; nothing when it is not running."""
        portal, stop = self._portal, self._stop
        self._portal = self._stop = None
        _unclosed.discard(self)
        if portal is None:
            return
        try:
            portal.call(self._aclose)
        finally:
            if stop is not None:
                stop()


def _daemon_portal() -> tuple[anyio.from_thread.BlockingPortal, Callable[[], None]]:
    """An event loop on a daemon thread, and how to stop it.

    `anyio.from_thread.start_blocking_portal` runs its loop on a worker thread the interpreter
    waits for at exit: a script that never called `close_sync()` waited for ever. A daemon
    thread is not waited for; the exit handler (`_unclosed`) closes the owner through it,
    after every other thread of the program has ended.
    """
    ready: concurrent.futures.Future[anyio.from_thread.BlockingPortal] = concurrent.futures.Future()

    async def serve() -> None:
        async with anyio.from_thread.BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(serve)
        except BaseException as exc:  # the loop could not start: say so to the caller
            if not ready.done():
                ready.set_exception(exc)

    thread = threading.Thread(target=run, name="toolkeeper-sync", daemon=True)
    thread.start()
    portal = ready.result()

    def stop() -> None:
        portal.call(portal.stop)
        thread.join()

    return portal, stop


_unclosed: AtExit[SyncPortal] = AtExit(SyncPortal.close, "closing the keeper at exit failed")
"""Portals started and not closed: closed when the program ends without `close_sync()` (their
keepers' ledgers then flushed and closed). Exit handlers run once every other thread of the
program has ended, so no call is cut short. A forked child closes none: their event loops run
on threads the child does not have (it waited for ever)."""


def no_running_loop(method: str, instead: str) -> None:
    """Refuse a blocking call on a thread whose event loop it would stall (or deadlock).

    Raises:
        RuntimeError: this thread runs an event loop; the message names `instead`.
    """
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    raise RuntimeError(
        f"Keeper.{method}() would block the {library} event loop running on this thread; "
        f"use {instead} here"
    )
