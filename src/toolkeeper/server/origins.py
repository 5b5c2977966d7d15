"""Which requests the HTTP gateway takes by their `Host` and `Origin`: the checks that keep a
web page from reaching it through DNS rebinding, as the MCP transport's security warning asks.

A page whose name an attacker points at the gateway's address is, to the browser, a page of
the attacker's site talking to itself: its requests carry the attacker's name in `Host` (and in
`Origin`). So a request is taken when

- its `Host` names the gateway as its clients reach it: an IP address (a literal address is
  not looked up, so it cannot be rebound), `localhost`, the host the gateway was told to bind,
  or a name of `allowed_hosts` (for a gateway reached by its DNS name, or through a reverse
  proxy that keeps the client's `Host`); otherwise 421;
- and, when a browser sends an `Origin`, that origin is the gateway's own (`http(s)://` and
  the `Host`; on a loopback address, `localhost`, `127.0.0.1` or `[::1]` with the `Host`'s
  port) or one of `allowed_origins`; otherwise 403, as the spec asks.

A request without `Origin` (what every non-browser client sends) is judged by its `Host`
alone. A browser's request from an origin taken here gets the CORS headers that let its page
send the bearer token and read the answer (and the `Mcp-Session-Id`): its preflight is answered
204 here, since it carries no token. What it is not: authentication (a token is still needed).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

import mcp_types
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HostGuard"]

logger = logging.getLogger(__name__)

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
_EXPOSED = "mcp-session-id, mcp-protocol-version, www-authenticate"
"""Response headers a page may read: a session's id, and why a token was refused."""


def _origin_key(origin: str) -> str:
    """An origin as compared: lower case, no trailing slash."""
    return origin.strip().rstrip("/").lower()


class HostGuard:
    """ASGI middleware refusing, before anything else reads them, HTTP requests whose `Host`
    or `Origin` is not the gateway's (see the module's docstring).

    Args:
        app: The application the requests that pass go to.
        bind_host: The host the gateway listens on (a name or an address; brackets allowed).
        allowed_hosts: More host names clients may use (any port).
        allowed_origins: More origins browsers may send (`scheme://host[:port]`, `:*` for any
            port).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        bind_host: str,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self._app = app
        bind_host = bind_host.strip("[]").lower()
        self._names = frozenset(["localhost", bind_host, *(n.lower() for n in allowed_hosts)])
        self._loopback = _is_loopback(bind_host)
        origins = [_origin_key(o) for o in allowed_origins]
        self._origins = frozenset(o for o in origins if not o.endswith(":*"))
        self._any_port = tuple(o[:-1] for o in origins if o.endswith(":*"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        host = origin = preflight = b""
        for key, value in scope["headers"]:
            if key == b"host":
                host = value
            elif key == b"origin":
                origin = value
            elif key == b"access-control-request-method":
                preflight = value
        refusal = None
        host_text = host.decode("latin-1").lower()
        if not self._host_allowed(host_text):
            refusal = 421, "HOST_NOT_ALLOWED", "Misdirected Request: Host not allowed", "host", host
        elif origin and not self._origin_allowed(origin.decode("latin-1"), host_text):
            refusal = 403, "FORBIDDEN", "Forbidden: Origin not allowed", "origin", origin
        if refusal is None:
            if not origin:
                await self._app(scope, receive, send)
            elif scope["method"] == "OPTIONS" and preflight:
                await _preflight(scope, origin)(scope, receive, send)
            else:
                await self._app(scope, receive, _with_cors(send, origin))
            return
        status, code, message, header, value = refusal
        logger.warning("refused an HTTP request for its %s header %r", header, value)
        if scope["path"].startswith("/api/"):
            # The operators' API answers in its own shape (`openapi.ERROR_CODES`).
            body: dict[str, object] = {"error": {"code": code, "message": message}}
        else:
            # A JSON-RPC error without an id, as the SDK answers the requests it refuses.
            error = {"code": mcp_types.INVALID_REQUEST, "message": message}
            body = {"jsonrpc": "2.0", "id": None, "error": error}
        await JSONResponse(body, status_code=status)(scope, receive, send)

    def _host_allowed(self, host: str) -> bool:
        name, _ = _split(host)
        if not name:
            return False
        if name in self._names:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def _origin_allowed(self, origin: str, host: str) -> bool:
        origin = _origin_key(origin)
        if origin in self._origins:
            return True
        scheme, sep, authority = origin.partition("://")
        if not sep or scheme not in ("http", "https"):
            return False
        if authority == host:
            return True
        if self._loopback:
            name, port = _split(authority)
            if name in _LOOPBACK and port == _split(host)[1]:
                return True
        return any(
            origin.startswith(prefix) and origin[len(prefix) :].isdigit()
            for prefix in self._any_port
        )


def _preflight(scope: Scope, origin: bytes) -> Response:
    """The answer to a CORS preflight from an allowed origin: the methods and headers of the
    MCP transport (those it asks for: a 2026 request names its own `Mcp-Param-*` headers)."""
    asked = Headers(scope=scope).get("access-control-request-headers", "")
    headers = {
        "access-control-allow-origin": origin.decode("latin-1"),
        "access-control-allow-methods": "GET, POST, DELETE",
        "access-control-max-age": "600",
        "vary": "origin",
    }
    if asked:
        headers["access-control-allow-headers"] = asked
    return Response(status_code=204, headers=headers)


def _with_cors(send: Send, origin: bytes) -> Send:
    """`send`, adding to the response the CORS headers that let `origin`'s page read it."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["access-control-allow-origin"] = origin.decode("latin-1")
            headers["access-control-expose-headers"] = _EXPOSED
            headers.add_vary_header("origin")
        await send(message)

    return sending


def _split(authority: str) -> tuple[str, str]:
    """`host[:port]` (IPv6 in brackets) as its name, without brackets, and its port ('' when
    none); an empty name when it cannot be read."""
    if authority.startswith("["):
        name, bracket, rest = authority[1:].partition("]")
        port = rest[1:]
        if not bracket or (rest and not (rest.startswith(":") and port.isdigit())):
            return "", ""
        return name, port
    name, colon, port = authority.rpartition(":")
    if not colon:
        return authority, ""
    return (name, port) if port.isdigit() and ":" not in name else ("", "")


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
