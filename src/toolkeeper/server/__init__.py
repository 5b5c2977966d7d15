"""The MCP gateway: per-principal tool views, every call through the executor.

Needs the `server` extra (`pip install "toolkeeper[server]"`), which brings the official MCP SDK
and its HTTP stack. `toolkeeper serve --config toolkeeper.toml` runs it, with the operators'
HTTP API and web console when the configuration names operators (`operator_app` serves them
beside a library `Keeper`).
"""

from ..core.extras import MissingExtra, missing

try:
    from .build import Deployment, build
    from .gateway import Gateway, GatewayPrincipal
    from .operator_app import OperatorFace, operator_app
    from .transports import http_app, mcp_server, serve_http, serve_stdio
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    # (a guard below, an MCP upstream's say, names its own part of the server extra)
    if isinstance(exc, MissingExtra) or missing(exc, "mcp", "mcp_types", "starlette", "uvicorn"):
        raise MissingExtra("server", "the MCP gateway") from exc
    raise

__all__ = [
    "Deployment",
    "Gateway",
    "GatewayPrincipal",
    "OperatorFace",
    "build",
    "http_app",
    "mcp_server",
    "operator_app",
    "serve_http",
    "serve_stdio",
]
