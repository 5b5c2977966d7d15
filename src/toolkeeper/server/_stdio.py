"""A stdio server transport on non-blocking pipes.

The SDK's `stdio_server` reads and writes through worker threads (one hand-off per line read,
two per message written); a gateway sits in the middle of every call, so it reads stdin and
writes stdout as asyncio pipes instead. Like the SDK, it serves from private duplicates of fds
0 and 1 and points them at the null device and at stderr meanwhile, so nothing else in the
process (a tool's print, a child process) can write on the wire. Where stdin or stdout is not a
pipe or socket (a regular file), or the event loop is not asyncio, the SDK's transport is used.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Self

import anyio
import mcp_types
import sniffio
from mcp.server.stdio import stdio_server as sdk_stdio_server
from mcp.shared.message import SessionMessage

__all__ = ["stdio_transport"]

_LINE_LIMIT = 64 * 1024 * 1024


@asynccontextmanager
async def stdio_transport() -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of MCP messages on this process's stdin and stdout."""
    if sniffio.current_async_library() != "asyncio" or not _pipes(0, 1):
        async with sdk_stdio_server() as streams:
            yield streams
        return
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved = _divert()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    in_file = os.fdopen(wire_in, "rb", buffering=0)
    out_file = os.fdopen(wire_out, "wb", buffering=0)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), in_file
    )
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, out_file
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    try:
        yield _LineReader(reader), _LineWriter(writer)
    finally:
        read_transport.close()
        write_transport.close()
        _restore(saved)


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


class _LineReader(_Stream):
    """The read stream: each `receive` reads and parses the next line itself.

    No reader task and no channel stand between the pipe and the session: a message costs no
    extra task switch. A line that is not a JSON-RPC message is handed on as the exception,
    as the SDK's transport does.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def receive(self) -> SessionMessage | Exception:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            line = await self._reader.readline()
        except ValueError as exc:  # a line over the limit: dropped, and said so
            return exc
        if not line:
            raise anyio.EndOfStream
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:
            return exc
        return SessionMessage(message)

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _LineWriter(_Stream):
    """The write stream: each `send` writes its line at once (the pipe buffers it)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._writer.write(data.encode() + b"\n")
        await self._writer.drain()


def _pipes(*fds: int) -> bool:
    import stat

    try:
        return all(
            stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode) for fd in fds
        )
    except OSError:
        return False


def _divert() -> tuple[int, int]:
    saved = (os.dup(0), os.dup(1))
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return saved


def _restore(saved: tuple[int, int]) -> None:
    for fd, copy in zip((0, 1), saved, strict=True):
        try:
            os.dup2(copy, fd)
        finally:
            os.close(copy)
