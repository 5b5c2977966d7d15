"""The tool sources of `toolkeeper.toml` beside upstream MCP servers: HTTP services
(`[http.NAME]`), programs (`[commands.NAME]`), and the sandbox a program or a stdio upstream
runs in (`sandbox = {...}`). Part of `toolkeeper.config` (which re-exports what users name);
kept apart to keep that module small.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from .connectors._openapi import DEFAULT_MAX_RESPONSE_BYTES
from .connectors.command import DEFAULT_MAX_OUTPUT_BYTES
from .core.errors import ErrorCode
from .core.signals import PIPELINE_CODES
from .core.values import Effect

__all__ = [
    "NO_NUL",
    "CommandSourceConfig",
    "CommandToolConfig",
    "HttpEndpointConfig",
    "HttpSourceConfig",
    "Model",
    "SandboxConfig",
    "ToolOverrideConfig",
    "http_url",
]


class Model(BaseModel):
    """A table of the configuration."""

    # A value refused here may be a token or a secret header: errors never quote one.
    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, strict=True, allow_inf_nan=False
    )


NO_NUL = r"^[^\x00]*$"
"""What a program's name, arguments and environment may hold (the OS ends a string at NUL)."""

ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A tool's name within its source (`SOURCE.NAME`): letters, digits, `_` and `-`."""


def http_url(url: str) -> str:
    """`url` when it is `http://` or `https://` with a host.

    Raises:
        ValueError: it is not (the message never quotes it: it may hold a password).
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number in range
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("a url here is http:// or https:// with a host")
    return url


class ToolOverrideConfig(Model):
    """`[upstreams.NAME.tools.TOOL]`, `[http.NAME.tools.OPERATION]`: trusted facts that
    replace what a tool's source says (an upstream's hints, an HTTP method's meaning)."""

    effect: Annotated[Effect | None, Field(strict=False)] = None
    idempotent: bool | None = None
    permissions: list[str] | None = None
    timeout: float | None = Field(default=None, gt=0)
    tags: list[str] = []


class SandboxConfig(Model):
    """`sandbox = {...}` of a stdio upstream or a `[commands.NAME]` source: run it in
    bubblewrap, seeing none of the gateway's process, environment, files or network."""

    network: bool = False
    """Whether it may use the network."""
    read_only: list[Annotated[str, Field(min_length=1, pattern=NO_NUL)]] = []
    """Further paths it may read (relative to the configuration file's folder)."""
    writable: Annotated[str, Field(min_length=1, pattern=NO_NUL)] | None = None
    """Its one writable directory (relative to the file's folder); default: a new empty one
    per run, removed after."""


def _network(text: str) -> str:
    ipaddress.ip_network(text, strict=False)
    return text


def _host_pattern(text: str) -> str:
    bare = text[2:] if text.startswith("*.") else text
    if not bare or not all(part and part.replace("-", "").isalnum() for part in bare.split(".")):
        raise ValueError("a host is a name (api.example.com) or *. and a domain")
    return text.lower()


def _document_file(path: str) -> str:
    # A document fetched at each start could change the tools under the operator's feet
    # (pinning covers MCP upstreams only): the operator reviews a file.
    if "://" in path:  # (http, https, file, ftp...: a URL of any kind)
        raise ValueError(
            "names a file beside this configuration, not a URL: download the document "
            "(curl -o api.json URL), review it, and name the file"
        )
    return path


_HTTP_METHOD = Literal["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]


class HttpEndpointConfig(ToolOverrideConfig):
    """`[http.NAME.endpoints.TOOL]`: one HTTP endpoint written out as a tool (placeholders
    `{arg}` in `path`; other arguments in the query, or the JSON body for POST/PUT/PATCH)."""

    method: _HTTP_METHOD
    path: Annotated[str, Field(pattern=r"^/")]
    description: str = ""
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None


class HttpSourceConfig(Model):
    """`[http.NAME]`: an HTTP service whose operations are tools (`NAME.operation`)."""

    base_url: Annotated[str, AfterValidator(http_url)]
    """The URL the operations' paths are below."""
    openapi: Annotated[str, Field(min_length=1), AfterValidator(_document_file)] | None = None
    """An OpenAPI 3.0/3.1 document (JSON, or YAML with pyyaml), relative to this file."""
    endpoints: dict[ToolName, HttpEndpointConfig] = {}
    """Endpoints written out here, by tool name."""
    headers: dict[str, str] = Field(default={}, repr=False)
    """Headers of every request to the base URL's origin (`${NAME}` expanded; never shown)."""
    allow_hosts: list[Annotated[str, AfterValidator(_host_pattern)]] | None = None
    """Hosts requests may reach (redirects included); default: the base URL's host."""
    allow_private: bool = False
    """Whether loopback, private and link-local addresses may be reached."""
    allow_networks: list[Annotated[str, AfterValidator(_network)]] = []
    """Networks reachable whatever else is refused (`10.1.0.0/16`)."""
    timeout: float = Field(default=30.0, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1)
    max_redirects: int = Field(default=5, ge=0, le=20)
    include: list[str] | None = None
    permissions: list[str] | None = None
    """Permissions every tool of this source needs (default `NAME:TOOL`)."""
    tools: dict[str, ToolOverrideConfig] = {}
    """Trusted facts about single operations, by name (over what their method says)."""

    @model_validator(mode="after")
    def _some_tools(self) -> HttpSourceConfig:
        if self.openapi is None and not self.endpoints:
            raise ValueError("give an openapi document, endpoints, or both")
        return self


def _exit_code(code: str) -> str:
    if code not in ErrorCode.__members__ or ErrorCode(code) in PIPELINE_CODES:
        raise ValueError(f"{code!r} is not an error code a tool may report")
    return code


class CommandToolConfig(Model):
    """`[commands.NAME.tools.TOOL]`: a program as the tool `NAME.TOOL`."""

    argv: Annotated[
        list[Annotated[str, Field(pattern=NO_NUL)] | list[Annotated[str, Field(pattern=NO_NUL)]]],
        Field(min_length=1),
    ]
    """The program, then its arguments; `{arg}` is a call's argument, one entry each; a
    list is a group left out unless all it names is given."""
    description: str = ""
    input_schema: dict[str, Any] | None = None
    """Default: each `{arg}` a string, required unless in a group."""
    output: Literal["text", "json"] = "text"
    effect: Annotated[Effect, Field(strict=False)] = Effect.WRITE
    idempotent: bool = False
    permissions: list[str] | None = None
    timeout: float = Field(default=30.0, gt=0)
    tags: list[str] = []
    success_codes: list[int] = [0]
    exit_codes: dict[
        Annotated[str, Field(pattern=r"^[0-9]+$")], Annotated[str, AfterValidator(_exit_code)]
    ] = {}
    """The error code of an exit status (`"2" = "INVALID_ARGUMENTS"`); others: TOOL_ERROR."""


class CommandSourceConfig(Model):
    """`[commands.NAME]`: programs run as tools, with what they share."""

    env_allow: list[Annotated[str, Field(pattern=r"^[^=\x00]+$")]] = []
    """The gateway's environment variables the programs get (only these)."""
    env: dict[
        Annotated[str, Field(pattern=r"^[^=\x00]+$")], Annotated[str, Field(pattern=NO_NUL)]
    ] = Field(default={}, repr=False)
    """Variables set for them (`${NAME}` expanded; left out of reprs)."""
    cwd: str | None = None
    """Their working directory, relative to this file (not with a sandbox)."""
    max_output_bytes: int = Field(default=DEFAULT_MAX_OUTPUT_BYTES, ge=1)
    sandbox: SandboxConfig | None = None
    permissions: list[str] | None = None
    """Permissions every tool of this source needs (default `NAME:TOOL`)."""
    tools: dict[ToolName, CommandToolConfig] = {}

    @model_validator(mode="after")
    def _one_folder(self) -> CommandSourceConfig:
        if self.sandbox is not None and self.cwd is not None:
            raise ValueError("a sandboxed program runs in its sandbox.writable, not cwd")
        return self
