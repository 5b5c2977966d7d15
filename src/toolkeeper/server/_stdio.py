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
from typing import Any

import sniffio
from mcp.server.stdio import stdio_server as sdk_stdio_server

from ..connectors._lines import LINE_LIMIT, LineReader, LineWriter

__all__ = ["stdio_transport"]


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
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
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
        yield LineReader(reader), LineWriter(writer)
    finally:
        read_transport.close()
        write_transport.close()
        _restore(saved)


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
