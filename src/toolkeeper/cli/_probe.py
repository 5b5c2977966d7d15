"""The MCP client of `toolkeeper list-tools`: initialize, `tools/list` and `tools/call` over
streamable HTTP, as JSON-RPC requests on httpx2.

What it is: the few requests a quick check of a running gateway makes. What it is not: an MCP
client (see `toolkeeper.connectors.mcp`, on the official SDK). Importing the SDK took most of a
`list-tools` run (its pydantic models: 3 s of 4 on a loaded machine), for three requests.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from .. import __version__

if TYPE_CHECKING:
    import httpx2

__all__ = ["ProbeError", "Session", "session"]

PROTOCOL_VERSION = "2025-11-25"
"""The revision offered in `initialize` (the server answers with the one it speaks)."""


class ProbeError(Exception):
    """The server answered with an HTTP error status, or a JSON-RPC error.

    Attributes:
        status: the HTTP status, or None for a JSON-RPC error.
        data: the JSON-RPC error's `data`, if any.
    """

    def __init__(self, message: str, *, status: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.data = data


class Session:
    """One MCP session over streamable HTTP (`session` opens it)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._headers = {"Accept": "application/json, text/event-stream"}
        self._id = 0

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """The `result` of one JSON-RPC request.

        Raises:
            ProbeError: an HTTP error status, or a JSON-RPC error.
        """
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        async with self._http.stream("POST", self._url, json=body, headers=self._headers) as r:
            _check(r)
            if "mcp-session-id" in r.headers:
                self._headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
            async for message in _messages(r):
                if message.get("id") == self._id:
                    if "error" in message:
                        error = message["error"]
                        raise ProbeError(str(error.get("message")), data=error.get("data"))
                    return message.get("result")
        raise ProbeError(f"no answer to {method}")

    async def notify(self, method: str) -> None:
        """Send one JSON-RPC notification."""
        body = {"jsonrpc": "2.0", "method": method}
        _check(await self._http.post(self._url, json=body, headers=self._headers))

    async def tools(self) -> list[dict[str, Any]]:
        """Every tool of `tools/list`, page after page."""
        tools: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = await self.request("tools/list", params)
            tools += page.get("tools", [])
            if not page.get("nextCursor"):
                return tools
            params = {"cursor": page["nextCursor"]}


@asynccontextmanager
async def session(url: str, token: str | None) -> AsyncIterator[Session]:
    """An initialized session with the MCP server at `url`.

    Raises:
        ProbeError: it answered initialize with an error.
        httpx2.TransportError: it could not be reached.
    """
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)
    ) as http:
        opened = Session(http, url)
        started = await opened.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "toolkeeper list-tools", "version": __version__},
            },
        )
        version = started.get("protocolVersion") if isinstance(started, dict) else None
        if version:
            opened._headers["MCP-Protocol-Version"] = str(version)
        await opened.notify("notifications/initialized")
        yield opened


def _check(response: httpx2.Response) -> None:
    if response.status_code >= 400:
        raise ProbeError(f"HTTP {response.status_code}", status=response.status_code)


async def _messages(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of a response: one JSON body, or server-sent events."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        yield json.loads(await response.aread())
        return
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []
