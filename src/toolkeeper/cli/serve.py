"""`toolkeeper serve`: run the MCP gateway; `toolkeeper list-tools`: list (or call) tools of
an MCP server over streamable HTTP, as a quick check of a running gateway.

```
toolkeeper serve --config toolkeeper.toml [--stdio] [--host H] [--port P] [--ledger URL]
toolkeeper list-tools --url http://127.0.0.1:8765/mcp --token TOKEN [--call NAME --args JSON]
```
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from . import _HELP

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add `serve` and `list-tools`."""
    serve = subparsers.add_parser(
        "serve",
        help=_HELP["serve"],
        description="Serve the tools of a configuration over MCP, every call through the "
        "executor, for the principals and tokens the configuration names.",
    )
    serve.add_argument("--config", required=True, help="the TOML configuration file")
    serve.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout")
    serve.add_argument("--host", type=_host, help="interface for HTTP (default: [server] host)")
    serve.add_argument("--port", type=_port, help="port for HTTP (default: [server] port)")
    serve.add_argument("--ledger", help="ledger URL (default: [server] ledger)")
    serve.add_argument(
        "--show-tokens", action="store_true", help="print each principal's token at start"
    )
    serve.set_defaults(func=_serve)

    probe = subparsers.add_parser("list-tools", help=_HELP["list-tools"])
    probe.add_argument(
        "--url", required=True, help="the MCP endpoint, e.g. http://127.0.0.1:8765/mcp"
    )
    probe.add_argument("--token", default=os.environ.get("TOOLKEEPER_TOKEN"), help="bearer token")
    probe.add_argument("--call", help="call this tool instead of listing")
    probe.add_argument("--args", default=None, help="arguments of --call as a JSON object")
    probe.set_defaults(func=_probe)


def _host(text: str) -> str:
    """`--host`: checked as `[server] host` is (`bind_host`), so that a host the gateway cannot
    name itself by is a usage error before anything starts."""
    from ..config import bind_host

    try:
        return bind_host(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return port


def _serve(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_config
    from ..core._visible import VisibleFormatter
    from ..core.errors import ConfigurationError, StoreError, sole_cause

    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(VisibleFormatter("%(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[console])
    try:
        from .. import server  # noqa: F401  (without the server extra: one line, not a traceback)
    except ImportError as exc:
        print(f"toolkeeper serve: {exc}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
        return anyio.run(_run, config, args)
    except ConfigError as exc:
        print(f"toolkeeper serve: {exc}", file=sys.stderr)
        return 2
    except ConfigurationError as exc:  # found while building: tool modules, the ledger URL
        print(f"toolkeeper serve: {args.config}: {exc}", file=sys.stderr)
        return 2
    except (OSError, StoreError, ExceptionGroup) as exc:  # the port is taken, the ledger down
        cause = sole_cause(exc)
        if not isinstance(cause, OSError | StoreError):
            raise
        print(f"toolkeeper serve: {cause}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


async def _run(config: Any, args: argparse.Namespace) -> int:
    from ..server import build, serve_http, serve_stdio
    from ..server.transports import url_host

    async with build(config, ledger=args.ledger) as deployment:
        gateway = deployment.gateway
        if args.stdio:
            wanted = config.server.stdio_principal
            if wanted is None and len(gateway.principals) == 1:
                wanted = next(iter(gateway.principals))
            if wanted is None:
                print("toolkeeper serve: set [server] stdio_principal", file=sys.stderr)
                return 2
            await serve_stdio(gateway, gateway.principals[wanted])
            return 0
        host = args.host or config.server.host
        path = config.server.path

        def started(port: int) -> None:
            url = f"http://{url_host(host)}:{port}{path}"
            names = ", ".join(sorted(t.name for t in deployment.keeper.catalog)) or "none yet"
            print(f"toolkeeper gateway on {url}", flush=True)
            print(f"tools: {names}", flush=True)
            for pid, entry in gateway.principals.items():
                if args.show_tokens and entry.token:
                    print(f"principal {pid}: token {entry.token}", flush=True)
            if deployment.operators is not None:
                base = f"http://{url_host(host)}:{port}"
                print(f"console: {base}/console  (API: {base}/api/v1)", flush=True)
                for name, op in config.operators.items():
                    # A token written in the file is no secret from whoever reads this;
                    # one from the environment is shown only when asked.
                    if op.token_env is None or args.show_tokens:
                        print(f"operator {name} ({op.role}): token {op.token}", flush=True)
            if args.show_tokens and gateway.principals:
                pid, entry = next(iter(gateway.principals.items()))
                program = sys.argv[0] if Path(sys.argv[0]).name == "toolkeeper" else "toolkeeper"
                print(
                    f"list its tools: {program} list-tools --url {url} --token {entry.token}",
                    flush=True,
                )

        port = args.port if args.port is not None else config.server.port
        await serve_http(
            gateway,
            host=host,
            port=port,
            path=path,
            started=started,
            allowed_hosts=config.server.allowed_hosts,
            allowed_origins=config.server.allowed_origins,
            max_sessions_per_principal=config.server.max_sessions_per_principal,
            max_requests_per_principal=config.server.max_requests_per_principal,
            session_idle_timeout=config.server.session_idle_timeout,
            request_timeout=config.server.request_timeout,
            operators=deployment.operators,
        )
    return 0


def _probe(args: argparse.Namespace) -> int:
    if args.args is not None and args.call is None:
        print("toolkeeper list-tools: --args goes with --call NAME", file=sys.stderr)
        return 2
    try:
        arguments = json.loads(args.args or "{}")
    except json.JSONDecodeError as exc:
        print(f"toolkeeper list-tools: --args is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("toolkeeper list-tools: --args must be a JSON object", file=sys.stderr)
        return 2
    from ..core.extras import require

    require("httpx2", "mcp", "the MCP client")  # else one line (`main`), not a traceback
    try:
        return anyio.run(_probe_async, args.url, args.token, args.call, arguments)
    except Exception as exc:  # one line for a person, not a traceback
        print(f"toolkeeper list-tools: {_probe_failure(exc, args.url)}", file=sys.stderr)
        return 1


def _probe_failure(exc: BaseException, url: str) -> str:
    """What went wrong, in one line that names `url`."""
    import httpx2

    from ..core.errors import sole_cause
    from ._probe import ProbeError

    exc = sole_cause(exc)
    if isinstance(exc, ProbeError) and exc.status == 401:
        return f"{url} answered 401: the token is missing or not one of its principals' tokens"
    if isinstance(exc, ProbeError) and exc.status == 404:
        return (
            f"{url} answered 404: name the gateway's MCP endpoint, its URL with the path of "
            "[server] path (default /mcp), as `toolkeeper serve` prints it"
        )
    if isinstance(exc, ProbeError):
        close = exc.data.get("did_you_mean") if isinstance(exc.data, dict) else None
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        return f"{url} answered: {exc}{hint}"
    if isinstance(exc, httpx2.TransportError):
        return f"cannot reach {url}: {type(exc).__name__}: {exc}"
    if isinstance(exc, json.JSONDecodeError | httpx2.DecodingError):
        return f"{url} answered something that is not MCP (not JSON: {exc})"
    return f"{url}: {type(exc).__name__}: {exc}"


async def _probe_async(url: str, token: str | None, call: str | None, arguments: Any) -> int:
    from ._probe import session

    async with session(url, token) as client:
        if call is None:
            for tool in await client.tools():
                summary = str(tool.get("description") or "").strip().splitlines()
                print(f"{tool.get('name')}\t{summary[0] if summary else ''}")
            return 0
        result = await client.request("tools/call", {"name": call, "arguments": arguments})
        print(json.dumps(result, indent=2))
        return 1 if result.get("isError") else 0
