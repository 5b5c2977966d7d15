"""What a process must finish when it exits without having closed it.

A program may end without closing what it opened (a script that never closes its keeper): a
keeper `execute_sync` runs, a SQLite batch waiting on a daemon thread for its commit, an audit
file's buffer held in a reference cycle no one finalizes. Each kind keeps its open ones in an
`AtExit`, which finishes them when the interpreter exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["AtExit"]

T = TypeVar("T")

_log = logging.getLogger("toolkeeper")


class AtExit(Generic[T]):
    """Objects to finish (`finish(item)`) when the interpreter exits, unless `discard`ed
    before (closed), latest first. Held weakly: an object that is gone needs nothing.

    One exit handler serves them all (an exit handler can be unregistered, but its slot is
    never given back), registered when this is made: an `AtExit` made at import, after the
    modules it imports, is finished before theirs. A failure is logged (`failed`) and the
    others are still finished. A forked child starts with none: its copies are its parent's,
    whose threads and file locks it does not have.
    """

    def __init__(self, finish: Callable[[T], None], failed: str) -> None:
        self._finish = finish
        self._failed = failed
        self._items: weakref.WeakValueDictionary[int, T] = weakref.WeakValueDictionary()
        atexit.register(self.finish_all)
        os.register_at_fork(after_in_child=self._items.clear)

    def add(self, item: T) -> None:
        """Finish `item` at exit."""
        self._items[id(item)] = item

    def discard(self, item: T) -> None:
        """Leave `item` alone at exit (it is closed)."""
        self._items.pop(id(item), None)

    def finish_all(self) -> None:
        """Finish every object still here (the exit handler)."""
        for item in reversed(list(self._items.values())):
            try:
                self._finish(item)
            except Exception:  # the program is ending: say why, finish the others
                _log.exception(self._failed)
