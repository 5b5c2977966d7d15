"""How to reach one upstream MCP server and how to present its tools: `UpstreamParams`, with
a `ToolOverride` per tool for the facts the operator trusts over the server's hints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import ConfigurationError
from ..core.values import Effect, Fence
from .sandbox import Sandbox

__all__ = ["ToolOverride", "UpstreamParams"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOverride:
    """Trusted facts about one upstream tool that replace the server's hints."""

    effect: Effect | None = None
    """The tool's effect; None keeps what the annotations hint."""
    idempotent: bool | None = None
    """Whether the tool is idempotent; None keeps the hint."""
    permissions: tuple[str, ...] | None = None
    """Permissions a principal needs; None means `<upstream>:<tool>`."""
    timeout: float | None = None
    """Seconds one attempt may run; None keeps the upstream's default."""
    tags: tuple[str, ...] = ()
    """Extra labels for search."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UpstreamParams:
    """How to reach one upstream MCP server and how to present its tools."""

    name: str
    """The namespace of its tools (`git` → `git.git_status`) and their `source`."""
    command: str | None = None
    """The program to run for stdio; exactly one of `command` and `url`."""
    args: tuple[str, ...] = ()
    """Arguments of `command`."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra environment of `command` (merged over a minimal safe environment; left out of
    the repr, as it may hold secrets)."""
    cwd: str | None = None
    """Working directory of `command`."""
    url: str | None = None
    """The streamable HTTP endpoint."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """HTTP headers sent to `url` (e.g. an Authorization header; left out of the repr)."""
    timeout: float = 30.0
    """Default seconds one call may run."""
    connect_timeout: float = 10.0
    """Seconds a connection (spawn, handshake, first listing) may take."""
    protocol: Literal["auto", "legacy"] = "auto"
    """`auto`: discover the server (2026-07-28), falling back to the `initialize` handshake;
    `legacy`: open with the handshake (for a server that mishandles discovery)."""
    tools: Mapping[str, ToolOverride] = field(default_factory=dict)
    """Overrides by the tool's upstream name."""
    trust_hints: bool = False
    """Whether the server's annotations fill a tool's `effect` and `idempotent` where `tools`
    says nothing; False reads every tool as destructive and not idempotent."""
    include: tuple[str, ...] | None = None
    """Upstream tool names to expose; None exposes every tool."""
    default_permissions: tuple[str, ...] | None = None
    """Permissions each tool needs unless overridden; None means `<upstream>:<tool>`."""
    tenants: frozenset[str] | None = None
    """Tenants its tools exist for; None means every tenant."""
    environments: frozenset[str] | None = None
    """Environments its tools exist in; None means every environment."""
    sandbox: Sandbox | None = None
    """Run the stdio server in this sandbox (bubblewrap): it cannot see the gateway's
    process, environment, configuration or ledger; None runs it as the gateway's user."""
    fence: Fence = Fence.SCAN
    """How its tools' output is shown to a model: fenced as data from this upstream and
    scanned by the detector (`scan`, the default), fenced only (`mark`), or as it is
    (`none`, for a server the operator trusts as their own code)."""
    pins: Literal["keep", "hide", "off"] = "keep"
    """Its tools' definitions are pinned when first seen (given a `Pins`); a changed one
    waits for an operator while the tool keeps its pinned definition (`keep`) or is left
    out (`hide`). `off` pins nothing: every change is shown at once."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ConfigurationError(f"upstream {self.name!r} needs exactly one of command, url")
        if not self.name or "." in self.name:
            raise ConfigurationError(f"upstream name {self.name!r} must be non-empty without '.'")
        if self.sandbox is not None and self.command is None:
            raise ConfigurationError(f"upstream {self.name!r}: only a stdio server is sandboxed")
