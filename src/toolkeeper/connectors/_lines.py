"""MCP messages as JSON lines on asyncio pipes, as the SDK's sessions read and write them.

The SDK's stdio transports put tasks and memory channels (or worker threads) between a pipe
and its session; the gateway sits in the middle of every call, on both sides (its own stdio
server, its stdio upstreams), so its sessions read and write the pipes themselves: each
`receive` reads and parses the next line, each `send` writes its line. Two hooks let the
gateway handle the lines it answers in bulk itself (`LineReader.take`, `LineWriter.sent`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, Self

import anyio
import mcp_types
import msgspec
from mcp.shared.message import SessionMessage

__all__ = ["LINE_LIMIT", "LineReader", "LineWriter", "decode_line"]

logger = logging.getLogger(__name__)

LINE_LIMIT = 64 * 1024 * 1024
"""The longest line read (64 MiB); a longer one is dropped and reported to the session."""

_EDGE = 4096
"""Bytes kept of each end of a line too long to read."""

decode_line = msgspec.json.Decoder().decode
"""Decodes one JSON line (raises `msgspec.DecodeError`)."""


class _Stream:
    """What the SDK asks of a stream besides moving messages: close it, use it in `async with`."""

    _closed = False

    async def aclose(self) -> None:
        self._closed = True

    def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closed = True


class LineReader(_Stream):
    """The read stream: each `receive` reads and parses the next line itself.

    No reader task and no channel stand between the pipe and the session: a message costs no
    extra task switch. A line that is not a JSON-RPC message is handed on as the exception,
    as the SDK's transport does. When `take` is set, each line is first decoded and offered to
    it; a line it takes never reaches the session. `at_end` is called when the pipe ends.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.take: Callable[[Any], bool] | None = None
        self.at_end: Callable[[], None] | None = None
        self.overlong: Callable[[bytes, bytes], None] | None = None
        """Sees the first and the last bytes of a line dropped for its length (to fail the
        request it answered: its id may come first or last)."""

    async def receive(self) -> SessionMessage | Exception:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:  # the pipe ended (mid-line, maybe)
                line = end.partial
            except asyncio.LimitOverrunError:  # a line over the limit: dropped, and said so
                return await self._drop_line()
            if not line:
                if self.at_end is not None:
                    self.at_end()
                raise anyio.EndOfStream
            if self.take is None or not self._taken(line, self.take):
                break
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:
            return exc
        return SessionMessage(message)

    async def _drop_line(self) -> Exception:
        """Skip the rest of a line longer than `LINE_LIMIT`, showing its first and last bytes
        to `overlong` (and to no log)."""
        head = await self._reader.read(_EDGE)
        tail = head
        while True:
            try:
                tail = (tail + await self._reader.readuntil(b"\n"))[-_EDGE:]
                break
            except asyncio.LimitOverrunError as over:
                tail = (tail + await self._reader.readexactly(over.consumed))[-_EDGE:]
            except asyncio.IncompleteReadError as end:
                tail = (tail + end.partial)[-_EDGE:]
                break
        # (not its first bytes: they may be a result that quotes a call's secret)
        logger.error("a message of more than %d bytes was dropped", LINE_LIMIT)
        if self.overlong is not None:
            self.overlong(head, tail)
        return ValueError(f"a message longer than {LINE_LIMIT} bytes was dropped")

    @staticmethod
    def _taken(line: bytes, take: Callable[[Any], bool]) -> bool:
        try:
            decoded = decode_line(line)
        except RecursionError:
            return False  # nested too deep to take: the session refuses it, the pipe goes on
        except msgspec.DecodeError:
            # Valid JSON that msgspec (and pydantic, so the SDK) refuse: an unpaired surrogate
            # escape (`"\\ud83d"`), as a peer that cut an emoji in half sends it. Left to the
            # session, such a message is dropped unanswered; taken, it gets its answer.
            try:
                decoded = json.loads(line)
            except (ValueError, RecursionError):
                return False  # not JSON at all: the session reports it
        try:
            return take(decoded)
        except Exception:  # a fault in the hook must not end the connection
            logger.exception("a line could not be offered to the fast path; the session gets it")
            return False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class LineWriter(_Stream):
    """The write stream: each `send` writes its line at once (the pipe buffers it). When
    `sent` is set, it sees each message the session sends."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.sent: Callable[[Any], None] | None = None

    async def send(self, item: SessionMessage) -> None:
        if self.sent is not None:
            self.sent(item.message)
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self.write_line(data.encode() + b"\n")

    async def write_line(self, line: bytes) -> None:
        """Write one encoded message, newline included."""
        self.write_nowait(line)
        await self.drain()

    async def drain(self) -> None:
        """Wait until the pipe's buffer is low enough to write more."""
        await self._writer.drain()

    def write_nowait(self, line: bytes) -> None:
        """Write one encoded message into the pipe's buffer without waiting for it to drain.

        Raises:
            anyio.ClosedResourceError: no byte of `line` was written: the pipe was closed, or
                it broke on this write (its reader gone, the process at the other end dead).
        """
        writer = self._writer
        if self._closed or writer.is_closing():
            raise anyio.ClosedResourceError
        idle = writer.transport.get_write_buffer_size() == 0
        writer.write(line)
        if idle and writer.is_closing():
            # With nothing queued before it, the line went to the pipe at once: a pipe that
            # closed on it refused it whole (a write in part queues the rest, and stays open).
            raise anyio.ClosedResourceError
