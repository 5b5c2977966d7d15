"""The MCP gateway: per-principal tool views, every call through the executor.

Needs the `server` extra (`pip install "toolkeeper[server]"`), which brings the official MCP SDK
and its HTTP stack. `toolkeeper serve --config toolkeeper.toml` runs it, with the operators'
HTTP API and web console when the configuration names operators (`operator_app` serves them
beside a library `Keeper`).
"""

try:
    from .build import Deployment, build
    from .gateway import Gateway, GatewayPrincipal
    from .operator_app import OperatorFace, operator_app
    from .transports import http_app, mcp_server, serve_http, serve_stdio
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    if exc.name is not None and exc.name.split(".")[0] in {
        "mcp",
        "mcp_types",
        "starlette",
        "uvicorn",
    }:
        raise ImportError(
            'the MCP gateway needs the server extra: pip install "toolkeeper[server]"'
        ) from exc
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
