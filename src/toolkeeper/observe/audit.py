"""Audit events: one structured event per persisted state change of a call.

Sinks are pluggable (`AuditSink`): a JSON lines file by default, an in-memory list for tests.
Events carry redacted arguments only, and error codes with their model-safe messages.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import msgspec

from ..core._exit import AtExit

__all__ = ["AuditEvent", "AuditSink", "JsonlAuditSink", "MemoryAuditSink", "NullAuditSink"]

_log = logging.getLogger("toolkeeper")


class AuditEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One state change of one call."""

    at: float
    """Wall-clock time (epoch seconds)."""
    task_id: str
    """Task of the call."""
    call_id: str
    """The call."""
    tool: str
    """Tool name as called."""
    version: str | None
    """Tool version, when the tool is known."""
    principal_id: str
    """Who the call acts for."""
    tenant: str
    """The principal's tenant."""
    status: str
    """The state entered."""
    previous: str | None = None
    """The state left, when there was a persisted one."""
    attempt: int = 0
    """Attempt number."""
    error_code: str | None = None
    """Code of a refusal or failure."""
    message: str | None = None
    """Model-safe message of a refusal or failure."""
    approval_id: str | None = None
    """Approval involved."""
    arguments: Mapping[str, Any] | None = None
    """Redacted arguments (on the first event of a call)."""
    extra: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """Anything else worth keeping (duration, effect_ref, digest)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form, without empty fields."""
        out: dict[str, Any] = {
            "at": self.at,
            "task_id": self.task_id,
            "call_id": self.call_id,
            "tool": self.tool,
        }
        if self.version is not None:
            out["version"] = self.version
        out["principal_id"] = self.principal_id
        out["tenant"] = self.tenant
        out["status"] = self.status
        if self.previous is not None:
            out["previous"] = self.previous
        out["attempt"] = self.attempt
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.arguments:
            out["arguments"] = dict(self.arguments)
        if self.extra:
            out["extra"] = dict(self.extra)
        return out


_OPTIONAL = ("error_code", "message", "approval_id")
_ENCODE = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":")).encode
_ENCODE_FAST = msgspec.json.Encoder(enc_hook=str).encode


def _line(event: AuditEvent) -> bytes:
    data = event.to_dict()
    try:
        return _ENCODE_FAST(data) + b"\n"
    except (TypeError, ValueError, OverflowError):  # what msgspec refuses, json may still write
        # A lone surrogate (only ever inside a JSON string) is written as its \uXXXX escape:
        # the line stays UTF-8, and reads back to the same text.
        return (_ENCODE(data) + "\n").encode("utf-8", "backslashreplace")


@runtime_checkable
class AuditSink(Protocol):
    """Receives audit events. `emit` must be quick and must not raise."""

    def emit(self, event: AuditEvent) -> None:
        """Record one event."""
        ...

    def close(self) -> None:
        """Flush and release. Idempotent."""
        ...


class NullAuditSink:
    """Drops every event."""

    def emit(self, event: AuditEvent) -> None:
        """Drop it."""

    def close(self) -> None:
        """Nothing to release."""


class MemoryAuditSink:
    """Keeps the latest `limit` events in `events`; the test double."""

    def __init__(self, limit: int = 100_000) -> None:
        self.events: deque[AuditEvent] = deque(maxlen=limit)

    def emit(self, event: AuditEvent) -> None:
        """Append it."""
        self.events.append(event)

    def close(self) -> None:
        """Nothing to release."""


class JsonlAuditSink:
    """Appends one JSON object per line to a file; flushes every `flush_every` events, on
    close, and when the process exits without closing it (not a forked child: its parent
    does) (the ledger, not this file, is the record that must survive a crash).

    Log rotation is followed: at most once a second the sink checks that its path still names
    the file it writes, and opens the path anew when the file was moved or deleted. A file
    that cannot be written (a read-only folder, a full disk) is one warning, not an error per
    event: events are dropped and counted until the path can be written again (tried at most
    once a second), and a second warning then says how many were lost.

    Args:
        path: The file; created with its folder when missing.
        flush_every: Events buffered before a flush.
        clock: Monotonic seconds (tests replace it).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_every: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._flush_every = flush_every
        self._clock = clock
        self._file: IO[bytes] | None = None
        self._identity: tuple[int, int] | None = None
        self._checked = -math.inf
        self._pending = 0
        self._lock = threading.Lock()
        self._failing = False
        self.dropped = 0
        """Events lost because the file could not be written (since the sink was made)."""

    def emit(self, event: AuditEvent) -> None:
        """Write one line (or count it as dropped while the file cannot be written)."""
        line = _line(event)
        with self._lock:
            now = self._clock()
            if now - self._checked >= 1.0:
                self._checked = now
                self._follow()
            if self._file is None:
                self.dropped += 1
                return
            self._pending += 1
            try:
                self._file.write(line)
                if self._pending >= self._flush_every:
                    self._file.flush()
                    self._pending = 0
            except OSError as exc:
                self._failed(exc)

    def _follow(self) -> None:
        """Open the path when no file is open, or when it no longer names the open file."""
        if self._file is not None:
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._identity:
                    return
            except OSError:
                pass  # moved or deleted: start a new file
            self._close_quietly()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Readable by its owner only (0600) when made: events hold the calls' arguments.
            # (An existing file keeps its mode.)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(fd, "ab")
            st = os.fstat(self._file.fileno())
            self._identity = (st.st_dev, st.st_ino)
            _unclosed.add(self)
        except OSError as exc:
            self._failed(exc)
            return
        if self._failing:
            self._failing = False
            _log.warning(
                "the audit file %s can be written again; %d events were lost",
                self.path,
                self.dropped,
            )

    def _failed(self, exc: OSError) -> None:
        """The file cannot be written: warn once per outage, count the buffered events as
        lost, and drop events until it can be written."""
        if not self._failing:
            self._failing = True
            _log.warning(
                "cannot write the audit file %s (%s); events are dropped until it can be written",
                self.path,
                exc.strerror or exc,
            )
        self.dropped += self._pending
        self._pending = 0
        self._close_quietly()

    def _close_quietly(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                self.dropped += self._pending  # what the close could not write out
        self._file = None
        self._identity = None
        self._pending = 0

    def flush(self) -> None:
        """Write buffered lines to the file."""
        with self._lock:
            if self._file is not None:
                try:
                    self._file.flush()
                except OSError as exc:
                    self._failed(exc)
                self._pending = 0

    def close(self) -> None:
        """Flush and close the file. Idempotent."""
        _unclosed.discard(self)
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:
                    self._failed(exc)
                self._file = None
                self._identity = None
                self._pending = 0


_unclosed: AtExit[JsonlAuditSink] = AtExit(
    JsonlAuditSink.flush, "the audit file's buffered lines could not be written at exit"
)
"""The JSON lines sinks not closed yet, whose buffered lines exit writes out. A forked child
writes none: its copy of a buffer holds its parent's lines, which the parent writes itself."""
