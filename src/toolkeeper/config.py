"""The gateway's TOML configuration: upstreams, local tools, principals, rules, ledger.

What it is: the schema of `toolkeeper.toml` (validated with pydantic; an unknown key is
refused, naming the key it looks like a typo of) and `load_config(path)`, which reads it with
the standard library's `tomllib`. Every error names the file, the line and the key
(`toolkeeper.toml:12: principals.alice.grants: ...`). Tokens may be written inline
(`token = "..."`) or read from the environment (`token_env = "NAME"`).
What it is not: the code that starts anything; see `toolkeeper.server.gateway`.
A commented example lives in `examples/toolkeeper.toml`.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator

from ._config_lines import BARE, dotted, key_lines, line_of, unknown_key
from ._config_sources import NO_NUL as _NO_NUL
from ._config_sources import (
    CommandSourceConfig,
    CommandToolConfig,
    HttpEndpointConfig,
    HttpSourceConfig,
    Model,
    SandboxConfig,
    ToolOverrideConfig,
)
from ._config_sources import http_url as _http_url
from .config_operators import OperatorConfig, resolve_operator_tokens
from .connectors.python import DEFAULT_TOOL_THREADS
from .core.errors import ConfigurationError
from .core.values import grant_pattern
from .dialects.base import RESULT_CHARS
from .ledger.factory import open_store

__all__ = [
    "CommandSourceConfig",
    "CommandToolConfig",
    "ConfigError",
    "GatewayConfig",
    "HttpEndpointConfig",
    "HttpSourceConfig",
    "LocalTools",
    "PrincipalConfig",
    "RuleConfig",
    "SandboxConfig",
    "ServerSettings",
    "ToolOverrideConfig",
    "UpstreamConfig",
    "bind_host",
    "load_config",
    "parse_config",
]

Exposure = Literal["direct", "progressive"]


class ConfigError(ConfigurationError):
    """A configuration file is invalid; the message names the file, line and key."""

    def __init__(self, file: str, line: int | None, key: str, reason: str) -> None:
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")
        self.file = file
        self.line = line
        self.key = key
        self.reason = reason


class _Model(BaseModel):
    model_config = Model.model_config


_HOST_LABEL = re.compile(r"[\w-]{1,63}")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


def bind_host(host: str) -> str:
    """`host` if the gateway can listen on it and name itself by it: an IP address (IPv6 with
    or without brackets) or a host name.

    Checked before anything starts: the gateway builds its URL (`http://HOST`) from it, and a
    host no URL can hold (`999.1.1.1`, `two words`, `http://127.0.0.1`) failed there, after
    the ledger and the upstreams were opened, with a pydantic traceback.

    Raises:
        ValueError: it is neither.
    """
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(bare)
        return host
    except ValueError:
        pass
    labels = bare.removesuffix(".").split(".")
    # A URL reads a name whose last label is a number as an IPv4 address (`1.2.3`).
    if (
        ":" in bare
        or not all(_HOST_LABEL.fullmatch(label) for label in labels)
        or _NUMERIC_LABEL.fullmatch(labels[-1])
    ):
        raise ValueError(
            f"{host!r} is not an IP address or a host name to listen on "
            "(e.g. 127.0.0.1, 0.0.0.0, ::1 or localhost)"
        )
    return host


class ServerSettings(_Model):
    """`[server]`: how the gateway listens and what it shows."""

    host: Annotated[str, AfterValidator(bind_host)] = "127.0.0.1"
    """Interface for streamable HTTP."""
    port: int = Field(default=8765, ge=0, le=65535)
    """Port for streamable HTTP (0 picks a free one)."""
    path: Annotated[str, Field(pattern=r"^/")] = "/mcp"
    """The MCP endpoint path (starts with `/`)."""
    allowed_hosts: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")]] = []
    """Host names (without port) clients may reach the gateway by, besides IP addresses,
    `localhost` and `host`: a request whose `Host` header names another is refused (421), so a
    web page cannot reach the gateway by pointing its own name at it (DNS rebinding). Name
    here the gateway's DNS name, or a reverse proxy's that passes the client's `Host` on."""
    allowed_origins: list[
        Annotated[
            str,
            Field(pattern=r"^(https?://([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(:([0-9]+|\*))?|null)$"),
        ]
    ] = []
    """Origins (`https://app.example.com`, `http://localhost:*` for any port) whose web
    pages may call the gateway, besides its own (their browsers get the CORS headers that let
    them): a request whose `Origin` header is another is refused (403). Requests without
    `Origin` (every client that is not a browser) need none."""
    exposure: Exposure = "direct"
    """`direct`: each permitted tool is listed; `progressive`: the three meta-tools."""
    ledger: str = "sqlite:///./toolkeeper.db"
    """Ledger URL: `sqlite:///relative.db`, `sqlite:////absolute.db`, `postgresql://...`. A
    relative SQLite path is the working directory's, as `toolkeeper approvals` and
    `toolkeeper ledger` take it, not the configuration file's."""
    ledger_pool_size: int = Field(default=4, ge=1)
    """The most connections each gateway process opens to a PostgreSQL ledger (a call finding
    none free waits for one). Several processes on one server need `processes x
    ledger_pool_size` below its `max_connections`. Unused with SQLite."""
    stdio_principal: str | None = None
    """The principal a `--stdio` client acts for (stdio has no token); default: the only
    principal, if there is exactly one."""
    name: str = "toolkeeper"
    """The server name shown to clients."""
    telemetry: Literal["off", "otel"] = "off"
    """`otel`: every call is traced and counted with OpenTelemetry, to the providers the
    process configures globally (extra `toolkeeper[otel]`; docs/observability.md)."""
    max_result_chars: int = Field(default=RESULT_CHARS, ge=0)
    """The most characters of a result's text a client is sent (default 100,000, about 25,000
    tokens); a longer one is cut with a note saying so, and the ledger keeps it whole. A tool
    that declares an output schema still sends its whole `structuredContent` (MCP requires
    it). 0 sends every result whole."""
    max_sessions_per_principal: int = Field(default=100, ge=1)
    """The most MCP sessions (handshake-era clients) one principal may hold open at once; one
    more is refused (HTTP 429) while every other principal still connects."""
    max_requests_per_principal: int = Field(default=200, ge=1)
    """The most HTTP requests one principal may have in flight at once: calls being answered,
    open event streams and 2026-07-28 `subscriptions/listen` streams, responses its client is
    slow to read. One more is refused (HTTP 429) while every other principal is served."""
    session_idle_timeout: float = Field(default=300.0, gt=0)
    """Seconds a session may go without a request (an open event stream counts as one)
    before it is ended; its client then opens a new one."""
    repeat_window: float = Field(default=5.0, ge=0)
    """Seconds after a write ends during which a client's identical proposal with no
    `dev.toolkeeper/call-id` is answered with that call's result, not run again (a plain
    client's retry, or the same write raced from several connections); 0 turns it off."""
    request_timeout: float = Field(default=30.0, gt=0)
    """Seconds a client has to send one HTTP request whole (headers and body) from its first
    byte, and a new connection to begin one; else its connection is closed."""
    tool_threads: int = Field(default=DEFAULT_TOOL_THREADS, ge=1)
    """How many sync local tool functions may run at once, each in a worker thread of the
    keeper's own (`Keeper(tool_threads=...)`). A call that finds none free by its timeout fails
    `UPSTREAM_UNAVAILABLE`, retryable: its function never started."""
    hold_suspicious_tools: bool = True
    """Whether a new upstream tool whose definition the detector flags is hidden until an
    operator accepts it (`toolkeeper tools accept`); False pins it, findings recorded."""
    pins_poll_interval: float = Field(default=2.0, gt=0)
    """Seconds between looks at the ledger for pin decisions made by another process."""


class UpstreamConfig(_Model):
    """`[upstreams.NAME]`: one upstream MCP server (stdio `command`, or HTTP `url`)."""

    command: Annotated[str, Field(min_length=1, pattern=_NO_NUL)] | None = None
    args: list[Annotated[str, Field(pattern=_NO_NUL)]] = []
    env: dict[
        Annotated[str, Field(pattern=r"^[^=\x00]+$")], Annotated[str, Field(pattern=_NO_NUL)]
    ] = Field(default={}, repr=False)
    """The server process's environment variables (`${NAME}` expanded; left out of reprs)."""
    cwd: str | None = None
    """The server process's working directory, relative to the configuration file's folder
    (default: the gateway's working directory, which relative `args` are then taken from)."""
    url: Annotated[str, AfterValidator(_http_url)] | None = None
    """The streamable HTTP endpoint: an `http://` or `https://` URL with a host."""
    headers: dict[str, str] = Field(default={}, repr=False)
    """HTTP headers sent with each request (`${NAME}` expanded; left out of reprs)."""
    timeout: float = Field(default=30.0, gt=0)
    connect_timeout: float = Field(default=20.0, gt=0)
    protocol: Literal["auto", "legacy"] = "auto"
    """`auto`: discover the server (2026-07-28), falling back to the handshake; `legacy`:
    open with the `initialize` handshake."""
    include: list[str] | None = None
    permissions: list[str] | None = None
    """Permissions every tool of this upstream needs (default `NAME:TOOL`)."""
    trust_hints: bool = False
    """Whether this server's annotations (`readOnlyHint`, `destructiveHint`,
    `idempotentHint`) say what its tools do where `tools` does not. Off by default: a server
    we do not control could claim a delete is read-only, so each of its tools is taken as
    destructive (every call needs approval, no failed attempt is retried)."""
    tools: dict[str, ToolOverrideConfig] = {}
    """Trusted facts about single tools, by their upstream name (these win over any hint)."""
    sandbox: SandboxConfig | None = None
    """Run the stdio server in a bubblewrap sandbox (see `SandboxConfig`)."""
    fence: Literal["scan", "mark", "none"] = "scan"
    """Its tools' output: fenced as data and scanned (`scan`), fenced (`mark`), or not."""
    pins: Literal["keep", "hide", "off"] = "keep"
    """A changed tool definition waits for an operator (`toolkeeper tools`) while the tool
    keeps its pinned one (`keep`) or is hidden (`hide`); `off` pins nothing."""

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of command (stdio) and url (streamable HTTP)")
        if self.sandbox is not None and (self.command is None or self.cwd is not None):
            raise ValueError("a sandbox is for a stdio upstream, in sandbox.writable (no cwd)")
        return self


class BudgetsConfig(_Model):
    """`[budgets]`: call budgets per task and rate limits per principal (see `Budgets`)."""

    max_calls_per_task: int | None = Field(default=None, ge=0)
    max_calls_per_tool_per_task: int | None = Field(default=None, ge=0)
    per_tool: dict[str, Annotated[int, Field(ge=0)]] = {}
    """Per-tool limits per task, by tool name."""
    calls_per_minute: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    """Unset: at most `calls_per_minute` calls in any minute. Set: a token bucket of this many
    calls at once, refilled at `calls_per_minute` (see `Budgets.burst`)."""
    rate_limiter: Annotated[str, Field(pattern=r"^rediss?://")] | None = None
    """A Redis URL: one rate limit shared by every gateway process (default: per process)."""


def _module_name(name: str) -> str:
    if not all(part.isidentifier() for part in name.split(".")):
        raise ValueError("is not a module name (names of Python identifiers joined by dots)")
    return name


class LocalTools(_Model):
    """`[[tools]]`: a Python module whose `register(keeper)` adds tools."""

    module: Annotated[str, AfterValidator(_module_name)] | None = None
    """An importable module name (dotted, absolute)."""
    file: str | None = None
    """A Python file, relative to the configuration file."""

    @model_validator(mode="after")
    def _one_source(self) -> LocalTools:
        if (self.module is None) == (self.file is None):
            raise ValueError("set exactly one of module and file")
        return self


class PrincipalConfig(_Model):
    """`[principals.ID]`: who a bearer token acts for and what it may use."""

    token: str | None = Field(default=None, repr=False)
    """Its bearer token: visible ASCII without spaces, as an `Authorization` header carries
    (left out of reprs and error messages)."""
    token_env: str | None = None
    """The environment variable holding the token, instead of `token` (not both)."""
    tenant: Annotated[str, Field(min_length=1, pattern=r"^[^\x00]*$")] = "default"
    environment: Annotated[str, Field(min_length=1, pattern=r"^[^\x00]*$")] = "default"
    grants: list[Annotated[str, AfterValidator(grant_pattern)]] = []
    """Permission patterns: `*`, `namespace:*` or one permission (see `grant_pattern`)."""
    exposure: Exposure | None = None
    """Overrides `[server] exposure` for this principal."""
    approve_by_elicitation: bool = False
    """Whether this principal's client may answer the approval of its own calls when asked
    through MCP elicitation (recorded as decided by `elicitation:ID`). Off by default: a
    client that accepts every elicitation would approve with no person involved; then only
    `toolkeeper approvals approve ID` approves."""
    client_task_ids: bool = False
    """Whether its client may name the task of a call (`dev.toolkeeper/task-id` in `_meta`;
    each principal's tasks are its own). Off by default: its calls share one task, and its
    budgets per task, and a call naming a task is refused `PERMISSION_DENIED` (a client could
    otherwise escape `max_calls_per_task` with a fresh task per call)."""
    attributes: dict[str, Any] = {}


class RuleConfig(_Model):
    """`[[rules]]`: one business rule on the tools whose names match `tools` (globs)."""

    tools: list[str] = ["*"]
    kind: Literal["require_approval", "deny", "allow", "path_inside", "domain_in", "at_most"]
    reason: str = ""
    param: str | None = None
    root: str | None = None
    domains: list[Annotated[str, Field(pattern=r"[^.]")]] = []
    """Host names (`example.com`): one of only dots, or empty, names no host."""
    cap: Annotated[float, Field(allow_inf_nan=False)] | None = None
    approve_above: bool = False

    @model_validator(mode="after")
    def _needs(self) -> RuleConfig:
        need = {
            "path_inside": ("param", "root"),
            "domain_in": ("param",),
            "at_most": ("param", "cap"),
        }
        for key in need.get(self.kind, ()):
            if getattr(self, key) is None:
                raise ValueError(f"a {self.kind} rule needs {key}")
        return self


def _upstream_name(name: str) -> str:
    if not BARE.fullmatch(name):
        raise ValueError(
            "an upstream's name begins its tools' names (NAME.tool): letters, digits, _ and -"
        )
    return name


class GatewayConfig(_Model):
    """A whole `toolkeeper.toml`."""

    server: ServerSettings = ServerSettings()
    upstreams: dict[Annotated[str, AfterValidator(_upstream_name)], UpstreamConfig] = {}
    """By name, which begins the names of its tools (`NAME.tool`)."""
    http: dict[Annotated[str, AfterValidator(_upstream_name)], HttpSourceConfig] = {}
    """HTTP services by name, which begins the names of their tools."""
    commands: dict[Annotated[str, AfterValidator(_upstream_name)], CommandSourceConfig] = {}
    """Programs as tools, by source name, which begins the names of their tools."""
    tools: list[LocalTools] = []
    principals: dict[str, PrincipalConfig] = {}
    rules: list[RuleConfig] = []
    budgets: BudgetsConfig | None = None
    operators: dict[str, OperatorConfig] = {}
    """The people who use the HTTP API and web console (`config_operators`)."""
    base_dir: str = "."
    """The directory relative file paths are taken from (the configuration file's): `[[tools]]
    file`, an upstream's `cwd`, a `path_inside` rule's `root`; not the ledger's."""


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _environ(
    name: str, where: Sequence[str | int], raise_at: Callable[[Sequence[str | int], str], NoReturn]
) -> str:
    """The gateway's environment variable `name`; one set empty (`DOCS_TOKEN=` in a unit
    file) is as missing as an unset one: a secret of none is never meant."""
    value = os.environ.get(name)
    if not value:
        raise_at(where, f"environment variable {name} is {'empty' if value == '' else 'unset'}")
    return value


def _expand_upstreams(
    config: GatewayConfig, raise_at: Callable[[Sequence[str | int], str], NoReturn]
) -> GatewayConfig:
    """`${NAME}` in an upstream's `env` and `headers` values (an HTTP source's `headers`, a
    command source's `env`) is the gateway's environment variable NAME, which must be set and
    not empty: secrets need not be written into the file."""

    def expand(where: tuple[str, ...], value: str) -> str:
        return _VARIABLE.sub(lambda match: _environ(match.group(1), where, raise_at), value)

    def table(where: tuple[str, ...], values: dict[str, str]) -> dict[str, str]:
        return {k: expand((*where, k), v) for k, v in values.items()}

    upstreams = {
        name: up.model_copy(
            update={
                "env": table(("upstreams", name, "env"), up.env),
                "headers": table(("upstreams", name, "headers"), up.headers),
            }
        )
        for name, up in config.upstreams.items()
    }
    http = {
        name: src.model_copy(update={"headers": table(("http", name, "headers"), src.headers)})
        for name, src in config.http.items()
    }
    commands = {
        name: src.model_copy(update={"env": table(("commands", name, "env"), src.env)})
        for name, src in config.commands.items()
    }
    return config.model_copy(update={"upstreams": upstreams, "http": http, "commands": commands})


_TOKEN = re.compile(r"[\x21-\x7e]+")
"""What an `Authorization: Bearer` header can carry."""


def _resolve_tokens(
    config: GatewayConfig, raise_at: Callable[[Sequence[str | int], str], NoReturn]
) -> GatewayConfig:
    principals = {}
    owners: dict[str, str] = {}  # token -> the principal it is the token of
    for pid, p in config.principals.items():
        token = p.token
        key = "token_env" if p.token_env is not None else "token"
        if p.token is not None and p.token_env is not None:
            raise_at(("principals", pid, "token_env"), "set one of token and token_env, not both")
        if p.token_env is not None:
            token = _environ(p.token_env, ("principals", pid, "token_env"), raise_at)
        if not token:
            raise_at(("principals", pid), "a principal needs token or token_env")
        if not _TOKEN.fullmatch(token):
            raise_at(
                ("principals", pid, key),
                "a token is visible ASCII without spaces (no client could send this one)",
            )
        if token in owners:  # a request with it would act for one of the two, unsaid which
            raise_at(("principals", pid, key), f"is the token of principals.{owners[token]} too")
        owners[token] = pid
        principals[pid] = p.model_copy(update={"token": token})
    return config.model_copy(update={"principals": principals})


def _check_rate_limiter(url: str, raise_at: Callable[[Sequence[str | int], str], NoReturn]) -> None:
    """Build the Redis limiter once (it connects nothing): a URL redis-py cannot read, or the
    `redis` extra missing, is then the file's error, not a traceback when the gateway starts."""
    where = ("budgets", "rate_limiter")
    try:
        from .policy.redis_limiter import RedisRateLimiter
    except ImportError as exc:
        raise_at(where, str(exc))
    try:
        RedisRateLimiter(url)
    except ValueError as exc:  # (its messages never quote the URL, which may hold a password)
        raise_at(where, str(exc))


def parse_config(
    text: str, *, file: str = "<config>", base_dir: str | None = None
) -> GatewayConfig:
    """Validate TOML text as a gateway configuration.

    Raises:
        ConfigError: invalid TOML or an invalid value (names file, line and key).
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise ConfigError(file, int(match.group(1)) if match else None, "", str(exc)) from exc
    lines = key_lines(text)

    def raise_at(loc: Sequence[str | int], reason: str) -> NoReturn:
        raise ConfigError(file, line_of(loc, lines), dotted(loc), reason)

    if "base_dir" in raw:  # where the file is, not something it says
        raise_at(("base_dir",), unknown_key(GatewayConfig, ("base_dir",)))
    raw["base_dir"] = base_dir if base_dir is not None else "."
    try:
        config = GatewayConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [p for p in first["loc"] if not (isinstance(p, str) and "[" in p)]
        if first["type"] == "extra_forbidden":
            raise_at(loc, unknown_key(GatewayConfig, loc))
        # a ValueError of ours is the reason itself (not "Value error, ...")
        raise_at(loc, str(first.get("ctx", {}).get("error", first["msg"])))
    config = _resolve_tokens(config, raise_at)
    operators = resolve_operator_tokens(
        config.operators,
        {pid: p.token for pid, p in config.principals.items()},
        lambda name, where: _environ(name, where, raise_at),
        raise_at,
    )
    config = config.model_copy(update={"operators": operators})
    config = _expand_upstreams(config, raise_at)
    if config.server.stdio_principal is not None and config.server.stdio_principal not in (
        config.principals
    ):
        raise_at(("server", "stdio_principal"), "names no principal")
    try:
        open_store(config.server.ledger)  # only made, not opened: is it a ledger URL at all?
    except ConfigurationError as exc:
        raise_at(("server", "ledger"), str(exc))
    if config.budgets is not None and config.budgets.rate_limiter is not None:
        _check_rate_limiter(config.budgets.rate_limiter, raise_at)
    sources = [("upstreams", n) for n in config.upstreams]
    sources += [("http", n) for n in config.http] + [("commands", n) for n in config.commands]
    named: dict[str, str] = {}
    for section, name in sources:
        if name in named:
            raise_at((section, name), f"is the name of [{named[name]}.{name}] too")
        named[name] = section
    for index, entry in enumerate(config.tools):
        if entry.file is None:
            continue
        path = (Path(config.base_dir) / entry.file).resolve()
        if not path.is_file():
            raise_at(("tools", index, "file"), f"no such file: {path}")
    return config


def load_config(path: str | os.PathLike[str]) -> GatewayConfig:
    """Read and validate a configuration file; relative file paths in it (`[[tools]] file`, an
    upstream's `cwd`, a rule's `root`) are taken from its folder, a SQLite ledger's from the
    working directory.

    Raises:
        ConfigError: the file is missing or invalid (names file, line and key).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")  # a byte-order mark is no statement
    except OSError as exc:
        raise ConfigError(str(file), None, "", f"cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(file), None, "", f"is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from exc
    return parse_config(text, file=str(file), base_dir=str(file.resolve().parent))
