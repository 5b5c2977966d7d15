"""An upstream MCP server over stdio, with a lane of its own for `tools/call`.

The SDK's stdio client bridges the server's pipes to its session through two tasks and two
memory channels, and the session's request path adds a dispatcher, a stream per pending request
and pydantic on both ends: on the 2-core bench machine the gateway process spent 1.40 ms of CPU
per call with it and 0.95 ms without it (`toolkeeper bench gateway`). The gateway sends one
request in bulk, `tools/call`. `PipeTransport` runs the server itself (as the SDK does: a new
session, a minimal inherited environment, stdin closed first and the process group terminated,
then killed, at the end), lets the SDK session read and write its pipes directly (`LineReader`,
`LineWriter`), and gives the connector a `CallLane`: calls sent on the same pipe with ids of
its own (`tk-1`, `tk-2`, ...: strings, never one of the session's integer ids) whose responses
are taken from the line that carries them. The session keeps doing everything else: the
handshake or discovery, listings, notifications, requests from the server.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any, cast

import anyio
import mcp_types
import msgspec
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ._lines import LINE_LIMIT, LineReader, LineWriter

__all__ = ["AnswerTooLarge", "CallLane", "LaneClosed", "PeerError", "PipeTransport"]

logger = logging.getLogger(__name__)

_ENCODE = msgspec.json.Encoder().encode
_ENVELOPE = (PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY)
_RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(tk-\d+)"')
"""The id of a lane request, in the first bytes of the line that answers it."""
_EXIT_GRACE = 2.0
"""Seconds the server has to exit after its stdin closes, then again after SIGTERM."""


class PeerError(MCPError):
    """The server answered the request with a JSON-RPC error: it is alive and said no (unlike
    the SDK's own CONNECTION_CLOSED, whose code a server may use for any error of its own)."""


class AnswerTooLarge(Exception):
    """The server answered, in a message longer than `LINE_LIMIT`: the call ran, its answer
    was dropped unread."""


class LaneClosed(Exception):
    """The connection ended; `sent` tells whether the request had been written."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class CallLane:
    """`tools/call` requests on the session's pipe, answered from their response lines."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._envelope: dict[str, Any] | None = None
        self._closed = False

    def ready(self, protocol_version: str | None) -> bool:
        """Whether calls can go on the lane in this protocol version: a handshake-era
        session, or a 2026-07-28 one whose envelope the session has sent."""
        if self._closed or protocol_version is None:
            return False
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            envelope = self._envelope
            return envelope is not None and envelope[PROTOCOL_VERSION_META_KEY] == protocol_version
        return True

    def observe(self, message: Any) -> None:
        """See a message the session sends: its requests' 2026-07-28 envelope is copied onto
        the lane's requests."""
        if not isinstance(message, mcp_types.JSONRPCRequest) or not message.params:
            return
        meta = message.params.get("_meta")
        if isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta:
            self._envelope = {k: meta[k] for k in _ENVELOPE if k in meta}

    def take(self, message: Any) -> bool:
        """Resolve the lane's request a response line answers; False for any other line."""
        if not isinstance(message, dict) or "method" in message:
            return False
        request_id = message.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, str) else None
        if future is None:
            return False
        if not future.done():
            future.set_result(message)
        return True

    def overlong(self, head: bytes, tail: bytes) -> None:
        """A line too long to read began with `head` and ended with `tail`: the call it
        answers (its id first, as Python servers write it, or last, as TypeScript ones do)
        fails with `AnswerTooLarge` at once, rather than wait for its deadline."""
        found = _RESPONSE_ID.search(head) or _RESPONSE_ID.search(tail)
        future = self._pending.get(found.group(1).decode()) if found else None
        if future is not None and not future.done():
            future.set_exception(AnswerTooLarge(f"the answer is longer than {LINE_LIMIT} bytes"))

    def close(self) -> None:
        """The connection ended: every call still waiting fails."""
        self._closed = True
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(LaneClosed("the connection closed mid-call", sent=True))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        meta: Mapping[str, Any],
        *,
        protocol_version: str,
    ) -> dict[str, Any]:
        """Send one `tools/call` and return its raw result. A call cancelled before its answer
        (a deadline around it, say) tells the server to cancel the request.

        Raises:
            LaneClosed: the connection ended (`sent` False: nothing was written, the pipe
                closed before or refused the request whole).
            MCPError: the server answered with an error.
        """
        if self._closed:
            raise LaneClosed("the connection is closed", sent=False)
        request_id = f"tk-{next(self._ids)}"
        if protocol_version in MODERN_PROTOCOL_VERSIONS and self._envelope is not None:
            meta = {**self._envelope, **meta}
        request = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": dict(arguments), "_meta": dict(meta)},
        }
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        answered = False
        try:
            try:
                self._writer.write_nowait(_ENCODE(request) + b"\n")
            except anyio.ClosedResourceError as exc:
                # (the server died before we noticed: nothing of the request reached it)
                raise LaneClosed("could not send: the pipe is closed", sent=False) from exc
            try:
                await self._writer.drain()
            except (anyio.ClosedResourceError, ConnectionError) as exc:
                raise LaneClosed(f"the pipe closed while sending: {exc}", sent=True) from exc
            response = await future
            answered = True
        finally:
            self._pending.pop(request_id, None)
            if not answered and not self._closed:
                self._cancel(request_id)
        error = response.get("error")
        if error is not None:
            try:
                error_data = mcp_types.ErrorData.model_validate(error)
            except ValidationError:
                # Not an error object (a bare string, say): still the server's "no", not a
                # result that could not be read (which would end the call as done).
                raise PeerError(
                    mcp_types.INTERNAL_ERROR, "the server answered with a malformed error"
                ) from None
            raise PeerError(error_data.code, error_data.message, error_data.data)
        result = response.get("result")
        return result if isinstance(result, dict) else {}

    def _cancel(self, request_id: str) -> None:
        """Tell the server to stop a request we no longer wait for (best effort)."""
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the gateway stopped waiting"},
        }
        with suppress(Exception):
            self._writer.write_nowait(_ENCODE(note) + b"\n")


class PipeTransport:
    """Runs an MCP server and yields the SDK session's (read, write) streams on its pipes;
    `lane` carries the connector's calls while the transport is open."""

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        self._command = command
        self._args = list(args)
        self._env = {**get_default_environment(), **(env or {})}
        self._cwd = cwd
        self._process: asyncio.subprocess.Process | None = None
        self.lane: CallLane | None = None

    async def __aenter__(self) -> tuple[LineReader, LineWriter]:
        # Shielded: a cancellation inside the spawn would leave the child unreaped.
        with anyio.CancelScope(shield=True):
            process = await asyncio.create_subprocess_exec(
                self._command,
                *self._args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
                limit=LINE_LIMIT,
            )
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        reader, writer = LineReader(process.stdout), LineWriter(process.stdin)
        lane = CallLane(writer)
        reader.take, reader.at_end, writer.sent = lane.take, lane.close, lane.observe
        reader.overlong = lane.overlong
        self.lane = lane
        return reader, writer

    async def __aexit__(self, *exc: object) -> None:
        if self.lane is not None:
            self.lane.close()
        process, self._process = self._process, None
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin, give the server time to exit, then terminate and kill its process group
    (the SDK's own escalation; it reads only the process's pid and return code)."""
    if process.stdin is not None:
        process.stdin.close()
    if await _exited(process, _EXIT_GRACE):
        return
    await terminate_posix_process_tree(cast(Any, process), _EXIT_GRACE)
    if not await _exited(process, _EXIT_GRACE):
        logger.warning("MCP server process %d did not exit after SIGKILL", process.pid)


async def _exited(process: asyncio.subprocess.Process, grace: float) -> bool:
    """Whether the process exits within `grace` seconds (polled: `wait()` also waits for pipes
    a surviving child may hold open)."""
    with anyio.move_on_after(grace):
        while process.returncode is None:  # noqa: ASYNC110 - no event tells of an exit
            await anyio.sleep(0.01)
    return process.returncode is not None
