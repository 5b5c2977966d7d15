"""Group commit for the SQLite store: writes that may wait share one commit.

What it is: the owner of the store's event-loop connection. Every statement on it runs under
one lock, in one of three modes:

- `READ`: runs as it is (inside the open batch, if there is one, so it sees its writes);
- `WRITE`: must be durable when it returns: it runs, then everything pending commits with it;
- `DEFERRED`: may wait up to `delay` seconds for its commit: it joins the open batch (opening
  one with `BEGIN IMMEDIATE`), and a background thread commits the batch when `delay` has
  passed, unless a `WRITE` committed it first.

A commit in WAL mode costs tens of microseconds of page writes however little it holds, so a
batch of N records costs one commit instead of N. What may wait is decided by the store: the
record of a finished read-only call, which a crash may lose without harm (the call changed
nothing; run again, it records anew). While a batch is open this connection holds the file's
write lock, so another process's write waits at most `delay` (its busy timeout covers it).

What it is not: a write-behind queue. Statements run at once, in order, on the caller's
thread; only the commit of deferred ones waits.

A process that ends without closing its store (a script that never closes its keeper) still
commits what is pending: at exit, before its committing thread (a daemon) is stopped. Only a
crash, or a kill, loses a batch. A forked child commits none of its parent's batches.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from ..core._exit import AtExit

__all__ = ["GroupCommit", "Mode"]

T = TypeVar("T")

_log = logging.getLogger("toolkeeper")

_EXIT_WAIT = 5.0
"""How long, at exit, a pending batch waits for a statement in flight on another thread."""


def _commit_at_exit(batch: GroupCommit) -> None:
    """Commit what is pending, at exit: the committing thread (a daemon) is about to be
    stopped where it stands. A statement still running on another thread may hold the lock;
    it is waited for a few seconds at most, so that exit never hangs."""
    if not batch.flush(timeout=_EXIT_WAIT):
        _log.error("the SQLite ledger's pending read-only call records were not committed")


_open: AtExit[GroupCommit] = AtExit(
    _commit_at_exit, "the SQLite ledger's pending read-only call records were lost"
)
"""The batches that may hold deferred commits (those with a committing thread). A forked
child commits none: its copy of a batch is the parent's transaction, without the file's write
lock (a POSIX lock, which a child does not inherit): committed at the child's exit, the
parent's records landed without it, and the parent's own commit then failed ("locking
protocol"), losing its next batch."""


class Mode(enum.Enum):
    """How a statement's effect must be committed."""

    READ = "read"
    WRITE = "write"
    DEFERRED = "deferred"


class GroupCommit:
    """Runs operations on one connection and commits deferred writes in batches.

    Args:
        conn: A connection in autocommit mode (`isolation_level=None`).
        delay: The longest a deferred write waits for its commit; 0 commits each at once.
    """

    def __init__(self, conn: sqlite3.Connection, *, delay: float) -> None:
        self.conn = conn
        self.delay = delay
        self.lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if delay > 0:
            self._thread = threading.Thread(
                target=self._commit_later, name="toolkeeper-sqlite-commit", daemon=True
            )
            self._thread.start()
            _open.add(self)

    def run(self, op: Callable[[sqlite3.Connection], T], mode: Mode) -> T:
        """Run `op` on the connection under the lock, committing as `mode` requires.

        Raises:
            sqlite3.Error: from `op`, from `BEGIN IMMEDIATE` (the file is locked: nothing ran
                and nothing is pending), or from the commit of a `WRITE`.
        """
        with self.lock:
            # The batch is open while the connection is in a transaction: SQLite itself ends it
            # when a statement fails on a full disk or an I/O error (and the statements after
            # then run, and commit, on their own).
            batch = self.conn.in_transaction
            try:
                if mode is Mode.DEFERRED and self._thread is not None:
                    if not batch:
                        self.conn.execute("BEGIN IMMEDIATE")
                        batch = True
                        self._wake.set()
                    return op(self.conn)
                result = op(self.conn)
            except BaseException:
                if batch and not self.conn.in_transaction:
                    _log.error("the SQLite ledger lost a batch of read-only call records")
                raise
            if mode is Mode.WRITE and self.conn.in_transaction:
                self._commit(raising=True)
            return result

    def flush(self, *, timeout: float = -1) -> bool:
        """Commit what is pending now (before another connection needs the write lock).
        False, committing nothing, when another thread held the lock for `timeout` seconds
        (-1: wait however long)."""
        if not self.lock.acquire(timeout=timeout):
            return False
        try:
            if self.conn.in_transaction:
                self._commit(raising=False)
        finally:
            self.lock.release()
        return True

    def close(self) -> None:
        """Stop the committing thread and commit what is pending. Idempotent."""
        _open.discard(self)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _commit(self, *, raising: bool) -> None:
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):  # the transaction may be gone already
                self.conn.execute("ROLLBACK")
            if raising:
                raise
            _log.exception("the SQLite ledger lost a batch of read-only call records")

    def _commit_later(self) -> None:
        while True:
            self._wake.wait()
            # Let the batch fill (writers commit it sooner); closing cuts the wait short.
            if self._stop.wait(self.delay):
                return  # close() commits what is pending
            with self.lock:
                if not self._stop.is_set():  # a close now must find the event still set
                    self._wake.clear()
                if self.conn.in_transaction:
                    self._commit(raising=False)
