"""Serving a `Gateway` over MCP: stdio for one local principal, streamable HTTP with bearer
tokens for many.

Over HTTP a request must first name the gateway in its `Host` and, from a browser, come from an
allowed `Origin` (`HostGuard`: 421 or 403, against DNS rebinding); then it must carry
`Authorization: Bearer <token>`; a missing or unknown token is answered 401 before any MCP
message is read, so such a client sees nothing. Sessions are bound to the principal that opened
them (the SDK refuses another token on the same session), capped per principal and ended when
idle; a client slow to send a request is cut off (`limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anyio
import mcp_types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Route

from .. import __version__
from ..connectors._lines import LineReader, LineWriter
from ._fastcall import FastCalls
from ._stdio import stdio_transport
from .changes import ToolListChanges
from .gateway import Gateway, GatewayPrincipal
from .headers import SecurityHeaders
from .limits import PrincipalRequests, PrincipalSessions, request_deadline
from .operator_app import OperatorFace
from .origins import HostGuard

__all__ = ["TokenVerifier", "http_app", "mcp_server", "serve_http", "serve_stdio", "url_host"]

logger = logging.getLogger(__name__)

DEFAULT_SESSIONS_PER_PRINCIPAL = 100
"""Open sessions one principal may hold (`[server] max_sessions_per_principal`)."""
DEFAULT_REQUESTS_PER_PRINCIPAL = 200
"""HTTP requests one principal may have in flight, event streams included
(`[server] max_requests_per_principal`)."""
DEFAULT_SESSION_IDLE_TIMEOUT = 300.0
"""Seconds a session may go without a request (`[server] session_idle_timeout`)."""
DEFAULT_REQUEST_TIMEOUT = 30.0
"""Seconds a client has to send one request (`[server] request_timeout`)."""

Resolve = Callable[[ServerRequestContext[Any, Any]], GatewayPrincipal | None]


class _GatewayServer(Server[Any]):
    """Announces `tools.listChanged` to handshake-era clients too."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def mcp_server(gateway: Gateway, resolve: Resolve, changes: ToolListChanges) -> Server[Any]:
    """A low-level MCP server whose handlers act for the principal `resolve` finds, and whose
    clients `changes` tells when the tool list changed."""

    def who(ctx: ServerRequestContext[Any, Any]) -> GatewayPrincipal:
        found = resolve(ctx)
        if found is None:
            raise MCPError(mcp_types.INVALID_REQUEST, "not authenticated")
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # The per-request session is short-lived; its connection lives as long as the
            # client stays connected, and can notify it outside any request.
            changes.seen(getattr(ctx.session, "_connection", None))
        return found

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return gateway.list_tools(who(ctx))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        return await gateway.call_tool(who(ctx), params, ctx)

    server = _GatewayServer(
        gateway.name,
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=changes.listen_handler(),
    )
    # Calls are traced and audited by the executor; a second span per message costs time.
    server.middleware.clear()
    return server


async def serve_stdio(gateway: Gateway, principal: GatewayPrincipal) -> None:
    """Serve MCP on this process's stdin/stdout for `principal` until stdin closes.

    `tools/call` requests are answered by `FastCalls` where the transport reads the pipes
    itself (asyncio); everything else, and everything on other event loops, by the SDK."""
    changes = ToolListChanges(gateway.keeper.catalog)
    server = mcp_server(gateway, lambda ctx: principal, changes)
    try:
        async with anyio.create_task_group() as tg, stdio_transport() as (read, write):
            tg.start_soon(changes.run)
            tg.start_soon(_stop_on_sigterm, tg.cancel_scope)
            if isinstance(read, LineReader) and isinstance(write, LineWriter):
                calls = FastCalls(
                    gateway,
                    principal,
                    server_info=server.server_info_stamp,
                    write=write.write_line,
                    tasks=tg,
                )
                read.take, write.sent = calls.take, calls.sent
            await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()
    finally:
        changes.close()


async def _stop_on_sigterm(scope: anyio.CancelScope) -> None:
    """SIGTERM stops the stdio server as Ctrl-C does: calls in flight are cancelled and their
    ends recorded (by default the signal killed the process, leaving them RUNNING)."""
    if threading.current_thread() is not threading.main_thread():
        return  # (signals reach the main thread only; an embedding program handles its own)
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            logger.info("SIGTERM: stopping")
            scope.cancel()
            return


class TokenVerifier:
    """Maps a bearer token to the principal configured with it."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def verify_token(self, token: str) -> AccessToken | None:
        """An access token naming the principal (`client_id`), or None for an unknown token."""
        entry = self._gateway.authenticate(token)
        if entry is None:
            return None
        pid = entry.principal.id
        return AccessToken(token=token, client_id=pid, subject=pid, scopes=[])


def _from_request(gateway: Gateway) -> Resolve:
    def resolve(ctx: ServerRequestContext[Any, Any]) -> GatewayPrincipal | None:
        request = ctx.request
        user = getattr(request, "scope", {}).get("user") if request is not None else None
        if not isinstance(user, AuthenticatedUser):
            return None
        return gateway.principals.get(user.access_token.client_id)

    return resolve


def http_app(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    changes: ToolListChanges | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_sessions_per_principal: int = DEFAULT_SESSIONS_PER_PRINCIPAL,
    max_requests_per_principal: int = DEFAULT_REQUESTS_PER_PRINCIPAL,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    operators: OperatorFace | None = None,
) -> Starlette:
    """The streamable HTTP app: MCP at `path` (and with `operators`, their API at `/api/v1`
    and console at `/console`), every request checked by `HostGuard` (its
    `Host` names the gateway: an address, `localhost`, `host` or one of `allowed_hosts`; a
    browser's `Origin` is the gateway's own or one of `allowed_origins`), then authenticated by
    bearer token. Each principal holds at most `max_sessions_per_principal` sessions (429
    beyond), each ended after `session_idle_timeout` seconds without a request, and has at
    most `max_requests_per_principal` requests in flight, open event streams and
    `subscriptions/listen` streams included (429 beyond). Handshake-era
    clients hear of tool list changes while `changes.run()` runs."""
    changes = changes or ToolListChanges(gateway.keeper.catalog)
    server = mcp_server(gateway, _from_request(gateway), changes)
    sessions = PrincipalSessions(
        server,
        per_principal=max_sessions_per_principal,
        session_idle_timeout=session_idle_timeout,
        # HostGuard checks every request, whatever the gateway is bound to; the SDK's own
        # check covered loopback binds only, with no way to allow a proxy's name.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    # As the SDK's `streamable_http_app` assembles it with a token verifier, around our
    # session manager.
    in_flight = PrincipalRequests(
        StreamableHTTPASGIApp(sessions), per_principal=max_requests_per_principal
    )
    endpoint = RequireAuthMiddleware(in_flight, required_scopes=[])
    routes: list[BaseRoute] = [Route(path, endpoint=endpoint)]
    if operators is not None:
        routes += operators.routes()
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(
                HostGuard,
                bind_host=host,
                allowed_hosts=allowed_hosts,
                allowed_origins=allowed_origins,
            ),
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(TokenVerifier(gateway))),
            Middleware(AuthContextMiddleware),
        ],
        lifespan=lambda app: sessions.run(),
    )


async def serve_http(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
    started: Callable[[int], None] | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_sessions_per_principal: int = DEFAULT_SESSIONS_PER_PRINCIPAL,
    max_requests_per_principal: int = DEFAULT_REQUESTS_PER_PRINCIPAL,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    operators: OperatorFace | None = None,
) -> None:
    """Serve streamable HTTP until cancelled; `started(port)` is called once listening (with
    the real port when `port` is 0). A client has `request_timeout` seconds to send each
    request whole, from its first byte (and a new connection to begin one), else its
    connection is closed. The other options are as in `http_app`."""
    import uvicorn

    changes = ToolListChanges(gateway.keeper.catalog)
    app = http_app(
        gateway,
        host=host,
        path=path,
        changes=changes,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_sessions_per_principal=max_sessions_per_principal,
        max_requests_per_principal=max_requests_per_principal,
        session_idle_timeout=session_idle_timeout,
        operators=operators,
    )
    # The app's lifespan (the MCP session manager) runs here, in our task group, rather than
    # in a task of uvicorn's that nothing would wait for on the way out.
    config = uvicorn.Config(
        app,
        host=host.strip("[]"),
        port=port,
        log_level="warning",
        lifespan="off",
        http=request_deadline(request_timeout),
    )

    def stopping() -> None:
        changes.end_streams()
        if operators is not None:
            operators.end_streams()
        gateway.keeper.drain()  # calls in flight stop retrying: shutdown within one attempt

    server = _quiet_server(uvicorn.Server, on_exit=stopping)(config)
    stopped = anyio.Event()

    async def run() -> None:
        # Shielded: only `should_exit` stops it, so uvicorn always shuts down cleanly
        # (closes its sockets) even when we are cancelled.
        try:
            with anyio.CancelScope(shield=True):
                await server.serve()
        except SystemExit:  # uvicorn failed to start, and logged why (a port in use...)
            pass
        finally:
            stopped.set()

    async with app.router.lifespan_context(app), anyio.create_task_group() as tg:
        tg.start_soon(run)
        tg.start_soon(changes.run)
        try:
            while not server.started:
                if stopped.is_set():
                    raise OSError(f"cannot serve on {host}:{port} (is the port in use?)")
                await anyio.sleep(0.01)
            if started is not None:
                sockets = [s for srv in server.servers for s in srv.sockets]
                started(sockets[0].getsockname()[1] if sockets else port)
            await stopped.wait()
        finally:
            server.should_exit = True
            changes.end_streams()
            if operators is not None:
                operators.end_streams()
            with anyio.CancelScope(shield=True):
                await stopped.wait()
            changes.close()
            tg.cancel_scope.cancel()


def url_host(host: str) -> str:
    """`host` as it goes into a URL: an IPv6 address in brackets."""
    host = host.strip("[]")
    return f"[{host}]" if ":" in host else host


def _quiet_server(base: type[Any], *, on_exit: Callable[[], None]) -> type[Any]:
    """uvicorn's server, except that the signal which stopped it is not raised again, and
    that `on_exit` runs (on the event loop) as soon as a signal asks it to stop.

    uvicorn shuts down gracefully on SIGINT or SIGTERM, then raises the signal once more for
    whoever runs it. Here that is our own event loop, still closing the gateway (the ledger,
    the upstreams): the KeyboardInterrupt would cut that short and, depending on timing,
    print a traceback. The shutdown the signal asked for has happened; `serve` returns.
    """

    class QuietServer(base):  # type: ignore[misc]
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # A signal handler may interrupt anything: the work is handed to the loop.
            self._tk_loop.call_soon_threadsafe(on_exit)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            self._tk_loop = asyncio.get_running_loop()
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return QuietServer
