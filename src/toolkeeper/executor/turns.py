"""One proposal of a call id at a time in this process.

A second proposal waits for the first to end, then dedupe hands it the recorded result (or a
conflict). Without that, both could pass the gates before either is recorded: a read-only
tool would run twice, and the second count against the task's budget as another call.
"""

from __future__ import annotations

import anyio

from ..core.values import ToolCall

__all__ = ["BUSY", "Turns"]

_Key = tuple[str, str]

BUSY: _Key = ("", "")
"""What `Turns.take` returns when another proposal of the id holds its turn (compared by
identity: it is no call's key)."""


class Turns:
    """The call ids in flight here, each with the event its next proposal waits for."""

    def __init__(self) -> None:
        self._held: dict[_Key, anyio.Event | None] = {}

    def take(self, call: ToolCall) -> _Key | None:
        """Hold the turn of `call`'s id when it is free; return what `give_back` takes, or
        `BUSY` (then `await wait(call)`), or None for an id that is not text (the pipeline
        refuses it, and it holds no turn)."""
        key = (call.task_id, call.call_id)
        try:
            if key in self._held:
                return BUSY
        except TypeError:  # (unhashable)
            return None
        self._held[key] = None
        return key

    async def wait(self, call: ToolCall) -> _Key:
        """Wait for the turn of `call`'s id, hold it, and return what `give_back` takes."""
        key = (call.task_id, call.call_id)
        while key in self._held:
            event = self._held[key]
            if event is None:
                event = self._held[key] = anyio.Event()
            await event.wait()
        self._held[key] = None
        return key

    def give_back(self, key: _Key | None) -> None:
        """End the turn `take` returned, and wake the proposal waiting for it."""
        if key is None:
            return
        event = self._held.pop(key, None)
        if event is not None:
            event.set()
