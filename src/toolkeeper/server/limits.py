"""How much of the HTTP gateway one client may hold: sessions and requests in flight per
principal, and the time it has to send a request.

What it is: `PrincipalSessions`, the MCP SDK's session manager with a cap on the open sessions
of each principal (the SDK's own cap is for the whole process: one token could fill it and
lock every other principal out); `PrincipalRequests`, a cap on each principal's HTTP requests
in flight (a call being answered, an event stream, a 2026-07-28 `subscriptions/listen`
stream, a response its client is slow to read: each holds a connection and a task); and
`request_deadline`, uvicorn's HTTP/1.1 protocol with a deadline for receiving each request,
headers and body (uvicorn has none: a client trickling a header for ever held its
connection, and its task, for ever).
What it is not: authentication (`transports.TokenVerifier`) or a rate limit on calls
(`[budgets]`). Sessions exist in the handshake era only; a 2026-07-28 request holds nothing
between requests, and only its requests in flight count.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INTERNAL_ERROR, ErrorData, JSONRPCError
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["PrincipalRequests", "PrincipalSessions", "request_deadline"]

logger = logging.getLogger(__name__)


class _AtCap(Exception):
    """A principal asked for a session beyond its cap (raised under the SDK's admission lock,
    before anything of the session exists)."""


class PrincipalSessions(StreamableHTTPSessionManager):
    """The SDK's session manager, with at most `per_principal` open sessions per principal:
    a request that would open one more is answered 429 with a JSON-RPC error saying so, and
    every other principal still connects. A session ends when its client deletes it, when it
    has been idle for `session_idle_timeout`, or with the manager.

    Args:
        app: The MCP server.
        per_principal: Open sessions one principal may hold (at least 1).
        **options: As for `StreamableHTTPSessionManager`.
    """

    def __init__(self, app: Any, *, per_principal: int, **options: Any) -> None:
        if per_principal < 1:
            raise ValueError("per_principal must be at least 1")
        super().__init__(app, **options)
        self.per_principal = per_principal
        self._open: Counter[str] = Counter()
        self._warned: set[str] = set()  # at the cap, and logged once for it

    def open_sessions(self, principal_id: str) -> int:
        """How many sessions `principal_id` holds open."""
        return self._open[principal_id]

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if requestor is None:  # (no credential: nothing to count it against, nor remember)
            return super()._admit_session(requestor)
        owner = requestor["client_id"]
        if self._open[owner] >= self.per_principal:
            raise _AtCap(owner)
        transport = super()._admit_session(requestor)
        if transport is not None:
            self._open[owner] += 1
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        # The SDK forgets the session before its first await: only the first discard of a
        # session finds its owner here, however many times it is discarded.
        owner = self._session_owners.get(session_id)
        if owner is not None:
            principal = owner["client_id"]
            self._open[principal] -= 1
            self._warned.discard(principal)
            if self._open[principal] <= 0:
                del self._open[principal]
        await super()._discard_session(session_id, transport)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except _AtCap as at_cap:
            principal = at_cap.args[0]
            if principal not in self._warned:  # (once each time it reaches it, not per refusal)
                self._warned.add(principal)
                logger.warning(
                    "principal %r holds %d sessions, its cap: new ones are refused (429)",
                    principal,
                    self.per_principal,
                )
            message = (
                f"Too many open sessions for this principal (at most {self.per_principal}): "
                "end one (HTTP DELETE with its Mcp-Session-Id) or let one expire"
            )
            await _too_many(message)(scope, receive, send)


class PrincipalRequests:
    """An ASGI app in front of `app` that lets each authenticated principal have at most
    `per_principal` HTTP requests in flight, from its headers to the end of its response:
    one more is answered 429 with a JSON-RPC error saying so, and every other principal is
    still served. (A request without a principal is passed on: authentication refuses it.)

    Raises:
        ValueError: `per_principal` is less than 1.
    """

    def __init__(self, app: ASGIApp, *, per_principal: int) -> None:
        if per_principal < 1:
            raise ValueError("per_principal must be at least 1")
        self.app = app
        self.per_principal = per_principal
        self._open: Counter[str] = Counter()
        self._warned: set[str] = set()  # at the cap, and logged once for it

    def in_flight(self, principal_id: str) -> int:
        """How many requests of `principal_id` are in flight."""
        return self._open[principal_id]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if scope["type"] != "http" or not isinstance(user, AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        principal = user.access_token.client_id
        if self._open[principal] >= self.per_principal:
            if principal not in self._warned:
                self._warned.add(principal)
                logger.warning(
                    "principal %r has %d requests in flight, its cap: new ones are refused (429)",
                    principal,
                    self.per_principal,
                )
            message = (
                f"Too many requests in flight for this principal (at most {self.per_principal}, "
                "event streams included): wait for one to end, or close one"
            )
            await _too_many(message)(scope, receive, send)
            return
        self._open[principal] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._open[principal] -= 1
            self._warned.discard(principal)
            if self._open[principal] <= 0:
                del self._open[principal]


def _too_many(message: str) -> Response:
    """The 429 answer to a request beyond a principal's cap."""
    body = JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INTERNAL_ERROR, message=message)
    )
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=429,
        media_type="application/json",
    )


def request_deadline(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, where each request must be received whole (request line,
    headers and body) within `seconds` of its first byte, and a new connection must send its
    first request within `seconds`: else the connection is closed.

    A request being answered (a long call, an open event stream) has no deadline: only
    receiving it does.

    Raises:
        ValueError: `seconds` is not positive.
    """
    if not seconds > 0:
        raise ValueError("the request deadline must be a positive number of seconds")
    import h11  # (uvicorn is imported only to serve, as `serve_http` does)
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class DeadlineProtocol(H11Protocol):
        _tk_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._tk_arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._tk_disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._tk_timer is None and self.conn.their_state is h11.IDLE:
                self._tk_arm()  # the first byte of the next request on this connection
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._tk_disarm()  # received whole (or the connection is ending)

        def _tk_arm(self) -> None:
            self._tk_disarm()
            self._tk_timer = self.loop.call_later(seconds, self._tk_expired)

        def _tk_disarm(self) -> None:
            if self._tk_timer is not None:
                self._tk_timer.cancel()
                self._tk_timer = None

        def _tk_expired(self) -> None:
            self._tk_timer = None
            receiving = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
            if receiving and not self.transport.is_closing():
                logger.info("a client took over %ss to send a request: closed", seconds)
                self.transport.close()

    return DeadlineProtocol
