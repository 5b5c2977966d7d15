"""How an upstream MCP server is reached: a program over stdio, or a URL over streamable HTTP.

`stdio_transport` runs the program (the connector's `PipeTransport`, with its call lane, on
POSIX under asyncio; the SDK's stdio transport elsewhere). `http_client` is the HTTP client of
a session, with the upstream's headers and three observers the connector reads: credentials
refused, a session the server forgot, a request that could not connect (nothing of it sent);
`http_transport` owns that client for the session's lifetime.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sniffio
from mcp import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ._mcp_params import UpstreamParams
from ._mcp_pipe import PipeTransport
from ._mcp_tools import IDEMPOTENCY_META_KEY
from .sandbox import Sandbox

__all__ = [
    "SandboxedPipe",
    "http_client",
    "http_transport",
    "idempotency_key_of",
    "resolve_command",
    "stdio_transport",
]


def resolve_command(command: str) -> str:
    """A bare command name found next to the running interpreter (this virtual environment's
    `bin`) is run from there, so `python` and console scripts installed with toolkeeper work
    without activating the environment; anything else is left to the PATH."""
    if os.sep in command:
        return command
    local = Path(sys.executable).parent / command
    return str(local) if local.is_file() and os.access(local, os.X_OK) else command


def stdio_transport(p: UpstreamParams) -> Any:
    """The connector's own pipe transport (with its call lane) on POSIX under asyncio, the
    SDK's stdio transport elsewhere."""
    assert p.command is not None
    command = resolve_command(p.command)
    env = dict(p.env) or None
    args, cwd = list(p.args), p.cwd
    on_pipe = os.name == "posix" and sniffio.current_async_library() == "asyncio"
    if p.sandbox is not None:
        command = shutil.which(command) or command  # (inside, nothing is on the PATH)
        if on_pipe:
            return SandboxedPipe(p.sandbox, command, args, env=env)
        cwd = p.sandbox.writable or tempfile.mkdtemp(prefix="tk-sandbox-")
        command, *args = p.sandbox.wrap([command, *args], workdir=cwd)
    if on_pipe:
        return PipeTransport(command, args, env=env, cwd=cwd)
    from mcp.client.stdio import stdio_client

    return stdio_client(StdioServerParameters(command=command, args=args, env=env, cwd=cwd))


class SandboxedPipe(PipeTransport):
    """A `PipeTransport` whose server runs in `sandbox`, in its writable directory (a new
    one for each connection, removed after, when it names none)."""

    def __init__(
        self, sandbox: Sandbox, command: str, args: list[str], *, env: dict[str, str] | None
    ) -> None:
        super().__init__(command, args, env=env)
        self._sandbox = sandbox
        self._argv = [command, *args]
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    async def __aenter__(self) -> Any:
        workdir = self._sandbox.writable
        if workdir is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="tk-sandbox-")
            workdir = self._scratch.name
        self._command, *self._args = self._sandbox.wrap(self._argv, workdir=workdir)
        self._cwd = workdir
        return await super().__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        try:
            await super().__aexit__(*exc)
        finally:
            scratch, self._scratch = self._scratch, None
            if scratch is not None:
                scratch.cleanup()


def http_client(
    p: UpstreamParams,
    refused: Callable[[int], None],
    gone: Callable[[], None],
    unsent: Callable[[str], None],
) -> Any:
    """The HTTP client of an upstream's session: its headers and timeout, proxies from the
    environment, and three observers: credentials refused (401/403), a session the server
    forgot (404 in a session), a request that could not connect (its idempotency key)."""
    import httpx2

    async def note(response: Any) -> None:
        if response.status_code in (401, 403):
            refused(response.status_code)  # the SDK reports it as "an error response" only
        elif response.status_code == 404 and response.request.headers.get("mcp-session-id"):
            gone()  # (the SDK reports it as a server's INVALID_REQUEST)

    class Client(httpx2.AsyncClient):
        """Notes the calls whose request could not even connect: nothing of them was sent
        (the SDK reports them as a closed connection, like one lost mid-call). The client's
        own transports stay (so do proxies from the environment)."""

        async def send(self, request: Any, **kwargs: Any) -> Any:
            try:
                return await super().send(request, **kwargs)
            except httpx2.ConnectError:
                key = idempotency_key_of(request.content)
                if key is not None:
                    unsent(key)
                raise

    return Client(
        headers=dict(p.headers),
        timeout=httpx2.Timeout(p.timeout, read=None),
        event_hooks={"response": [note]},
    )


def idempotency_key_of(body: bytes) -> str | None:
    """The idempotency key a `tools/call` request body carries in its `_meta`, if any."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    key = meta.get(IDEMPOTENCY_META_KEY) if isinstance(meta, dict) else None
    return key if isinstance(key, str) else None


@asynccontextmanager
async def http_transport(url: str, http: Any) -> AsyncIterator[Any]:
    """The streamable HTTP transport to `url` on client `http`, closing the client with it."""
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams
