"""The tool sources of a configuration beside upstream MCP servers: HTTP services and programs.

`http_source` builds an `HttpSource` (its OpenAPI document read here, from a file beside the
configuration), `command_tools` the tools of a `[commands.NAME]` table, `sandbox_of` the
sandbox a table asks for. Paths in the file are taken from its folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..catalog.registry import Tool
from ..config import CommandSourceConfig, HttpSourceConfig, SandboxConfig, ToolOverrideConfig
from ..connectors._mcp_params import ToolOverride
from ..connectors.command import CommandConnector, CommandParams
from ..connectors.sandbox import Sandbox, bwrap_path
from ..core.errors import ConfigurationError, ErrorCode
from ..core.extras import MissingExtra
from ..core.values import ToolSpec

if TYPE_CHECKING:
    from ..connectors.http import HttpSource

__all__ = ["command_tools", "http_source", "override", "sandbox_of"]


def _path(base_dir: str, path: str) -> str:
    return str((Path(base_dir) / path).resolve())


def sandbox_of(cfg: SandboxConfig | None, base_dir: str) -> Sandbox | None:
    """The sandbox a configuration table asks for, if any.

    Raises:
        ConfigurationError: bubblewrap is not installed.
    """
    if cfg is None:
        return None
    bwrap_path()  # (said when the gateway starts, not at the first call)
    return Sandbox(
        network=cfg.network,
        read_only=tuple(_path(base_dir, p) for p in cfg.read_only),
        writable=_path(base_dir, cfg.writable) if cfg.writable else None,
    )


def override(o: ToolOverrideConfig) -> ToolOverride:
    """The connector's form of a tool's trusted facts."""
    return ToolOverride(
        effect=o.effect,
        idempotent=o.idempotent,
        permissions=tuple(o.permissions) if o.permissions is not None else None,
        timeout=o.timeout,
        tags=tuple(o.tags),
    )


def _document(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise ConfigurationError(f"{path}: a YAML document needs pyyaml") from exc
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"not YAML: {exc}") from exc
    return json.loads(text)


def http_source(name: str, cfg: HttpSourceConfig, base_dir: str) -> HttpSource:
    """The HTTP source `[http.NAME]` describes (not yet used: close it with `aclose`).

    Raises:
        ConfigurationError: its OpenAPI document cannot be read or is not OpenAPI 3.x, or
            the `http` extra is missing.
    """
    try:
        from ..connectors._http_guard import AddressPolicy
        from ..connectors._openapi import openapi_operations, plain_operation
        from ..connectors.http import HttpParams, HttpSource
    except MissingExtra as exc:
        raise ConfigurationError(str(exc)) from exc
    operations = []
    if cfg.openapi is not None:
        path = Path(base_dir) / cfg.openapi
        try:
            doc = _document(path)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"[http.{name}] openapi: cannot read {path}: {exc}") from exc
        if not isinstance(doc, dict):
            raise ConfigurationError(f"[http.{name}] openapi: {path} is not an OpenAPI document")
        try:
            operations += openapi_operations(doc)
        except ConfigurationError as exc:
            raise ConfigurationError(f"[http.{name}] openapi: {path}: {exc}") from exc
    overrides = {tool: override(o) for tool, o in cfg.tools.items()}
    for tool, e in cfg.endpoints.items():
        operations.append(
            plain_operation(
                tool,
                method=e.method,
                path=e.path,
                description=e.description,
                input_schema=e.input_schema,
                output_schema=e.output_schema,
            )
        )
        overrides[tool] = override(e)
    params = HttpParams(
        name=name,
        base_url=cfg.base_url,
        headers=dict(cfg.headers),
        allow_hosts=tuple(cfg.allow_hosts) if cfg.allow_hosts is not None else None,
        addresses=AddressPolicy.of(
            allow_private=cfg.allow_private, allow_networks=cfg.allow_networks
        ),
        timeout=cfg.timeout,
        connect_timeout=cfg.connect_timeout,
        max_response_bytes=cfg.max_response_bytes,
        max_redirects=cfg.max_redirects,
        tools=overrides,
        include=tuple(cfg.include) if cfg.include is not None else None,
        default_permissions=tuple(cfg.permissions) if cfg.permissions is not None else None,
    )
    return HttpSource(params, operations)


def command_tools(name: str, cfg: CommandSourceConfig, base_dir: str) -> list[Tool]:
    """The tools `[commands.NAME]` describes.

    Raises:
        ConfigurationError: a program is not found, or a sandbox needs bubblewrap.
    """
    from ..connectors._argv import placeholders, schema_for, template

    sandbox = sandbox_of(cfg.sandbox, base_dir)
    tools = []
    for tool, t in cfg.tools.items():
        argv = template(t.argv)
        schema = t.input_schema or schema_for(argv)
        unknown = set(placeholders(argv)) - set(schema.get("properties") or {})
        if unknown:
            raise ConfigurationError(
                f"[commands.{name}.tools.{tool}] argv names {', '.join(sorted(unknown))}, "
                "which its input_schema does not"
            )
        params = CommandParams(
            argv=argv,
            env_allow=tuple(cfg.env_allow),
            env=dict(cfg.env),
            cwd=_path(base_dir, cfg.cwd) if cfg.cwd else None,
            max_output_bytes=cfg.max_output_bytes,
            output=t.output,
            success_codes=frozenset(t.success_codes),
            exit_codes={int(k): ErrorCode(v) for k, v in t.exit_codes.items()},
            sandbox=sandbox,
        )
        try:
            connector = CommandConnector(params)
        except ConfigurationError as exc:
            raise ConfigurationError(f"[commands.{name}.tools.{tool}]: {exc}") from exc
        permissions = t.permissions or cfg.permissions or [f"{name}:{tool}"]
        spec = ToolSpec(
            name=f"{name}.{tool}",
            description=t.description,
            input_schema=schema,
            effect=t.effect,
            idempotent=t.idempotent,
            permissions=tuple(permissions),
            tags=tuple(t.tags),
            timeout=t.timeout,
            source=name,
        )
        tools.append(Tool(spec=spec, connector=connector))
    return tools
