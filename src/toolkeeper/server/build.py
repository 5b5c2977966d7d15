"""From a `GatewayConfig` to a running gateway: keeper, local tools, upstreams, principals.

`Deployment` is the resource: `async with build(config) as deployment:` opens the ledger,
connects every upstream (concurrently; one that does not answer is retried in the background
and its tools appear when it does) and closes them all on exit.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import anyio

from ..catalog.registry import CatalogEvent
from ..config import BudgetsConfig, GatewayConfig, LocalTools, RuleConfig, UpstreamConfig
from ..connectors.mcp import McpUpstream, UpstreamParams
from ..core.errors import ConfigurationError
from ..core.values import Fence, Principal
from ..keeper import Keeper
from ..ledger.factory import POSTGRES_SCHEMES, open_store
from ..observe.telemetry import Telemetry
from ..policy import rules as R
from ..policy.budgets import Budgets, RateLimiter
from ..policy.pins import Pins
from .desk import Desk
from .gateway import Gateway, GatewayPrincipal
from .operator_app import OperatorFace
from .operators import Operators
from .sources import command_tools, http_source, override, sandbox_of

__all__ = ["Deployment", "build", "load_tool_module"]

_log = logging.getLogger("toolkeeper")


class Deployment:
    """A keeper, its gateway and its upstream connections, opened and closed together."""

    def __init__(
        self,
        keeper: Keeper,
        gateway: Gateway,
        upstreams: Sequence[McpUpstream],
        sources: Sequence[Any] = (),
        pins: Pins | None = None,
        operators: Operators | None = None,
    ) -> None:
        self.keeper = keeper
        self.gateway = gateway
        self.upstreams = tuple(upstreams)
        self.sources = tuple(sources)
        """Other sources with connections to close (HTTP services)."""
        self.pins = pins
        """The upstream tools' pinned definitions: the operators' API (`pending`, `diff`,
        `accept`, `reject`) that `toolkeeper tools` and a console call."""
        self.operators: OperatorFace | None = None
        """The operators' API and console, when the configuration names operators."""
        if operators:
            desk = Desk(
                keeper=keeper,
                principals={pid: p.principal for pid, p in gateway.principals.items()},
                connected=self.upstream_status,
            )
            self.operators = OperatorFace(desk, operators)
        self._stack: AsyncExitStack | None = None

    def upstream_status(self) -> dict[str, bool]:
        """Whether each upstream is connected, by name."""
        return {u.params.name: u.connected for u in self.upstreams}

    async def __aenter__(self) -> Deployment:
        async with AsyncExitStack() as stack:
            close_limiter = getattr(self.keeper.runtime.limiter, "aclose", None)
            if close_limiter is not None:  # a shared (Redis) limiter's connections
                stack.push_async_callback(close_limiter)
            await stack.enter_async_context(self.keeper)
            for source in self.sources:
                stack.push_async_callback(source.aclose)
            stack.callback(self.gateway.close)  # (before the keeper closes)
            if self.operators is not None:
                stack.callback(self.operators.close)
            for upstream in self.upstreams:
                await upstream.start()
                stack.push_async_exit(upstream)
            async with anyio.create_task_group() as tg:
                for upstream in self.upstreams:
                    tg.start_soon(upstream.wait_attempted)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        for upstream in self.upstreams:
            upstream.cancel()
        await stack.aclose()


def load_tool_module(entry: LocalTools, base_dir: str) -> ModuleType:
    """Import a local tool module (by name, or from a file relative to `base_dir`)."""
    if entry.module is not None:
        return importlib.import_module(entry.module)
    assert entry.file is not None
    path = (Path(base_dir) / entry.file).resolve()
    name = f"toolkeeper_local_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"cannot load tools from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _telemetry(kind: str) -> Telemetry | None:
    """`[server] telemetry`: OpenTelemetry to the process's global providers, or nothing."""
    if kind != "otel":
        return None
    try:
        from ..observe.otel import OpenTelemetry
    except ImportError as exc:
        raise ConfigurationError(f'[server] telemetry = "otel": {exc}') from None
    return OpenTelemetry()


def _budgets(cfg: BudgetsConfig | None) -> tuple[Budgets | None, RateLimiter | None]:
    if cfg is None:
        return None, None
    budgets = Budgets(
        max_calls_per_task=cfg.max_calls_per_task,
        max_calls_per_tool_per_task=cfg.max_calls_per_tool_per_task,
        per_tool=dict(cfg.per_tool),
        calls_per_minute=cfg.calls_per_minute,
        burst=cfg.burst,
    )
    if cfg.rate_limiter is None:
        return budgets, None
    from ..policy.redis_limiter import RedisRateLimiter

    return budgets, RedisRateLimiter(cfg.rate_limiter)


def _note_name(names: list[str], event: CatalogEvent) -> None:
    names.append(event.tool.name)


def _rule(cfg: RuleConfig, base_dir: str) -> R.Rule:
    kinds: dict[str, Any] = {
        "require_approval": lambda: lambda inp: R.require_approval(cfg.reason or "configured"),
        "deny": lambda: lambda inp: R.deny(cfg.reason or "not allowed by configuration"),
        "allow": lambda: lambda inp: R.allow(skip_approval=True, reason=cfg.reason),
        # Like every path in the file, a relative root is taken from the file's folder.
        "path_inside": lambda: R.path_inside(str(cfg.param), Path(base_dir) / str(cfg.root)),
        "domain_in": lambda: R.domain_in(str(cfg.param), cfg.domains),
        "at_most": lambda: R.at_most(
            str(cfg.param), float(cfg.cap or 0), approve_above=cfg.approve_above
        ),
    }
    inner: R.Rule = kinds[cfg.kind]()
    patterns = tuple(cfg.tools)
    every_tool = patterns == ("*",)

    def rule(inp: R.RuleInput) -> Any:
        if not any(fnmatch.fnmatchcase(inp.spec.name, p) for p in patterns):
            return None
        try:
            return inner(inp)
        except R.ParameterMissing:
            if every_tool:
                raise  # (a rule for every tool skips the tools without its parameter)
            # A tool the rule names that lacks its parameter (a filesystem server's
            # `move_file(source, destination)` under `files.*` with `path`) is refused:
            # skipped, it read and wrote outside the sandbox.
            _log.error(
                "the %s rule for %s cannot check %r: it has no parameter %r; its calls are "
                "refused (name the tools the rule fits, or add a rule for its parameters)",
                cfg.kind,
                ", ".join(patterns),
                inp.spec.name,
                cfg.param,
            )
            return R.deny("a policy rule could not be evaluated; the call was not run")

    return rule


def upstream_params(name: str, cfg: UpstreamConfig, base_dir: str) -> UpstreamParams:
    """The connector parameters of one configured upstream."""
    overrides = {tool: override(o) for tool, o in cfg.tools.items()}
    cwd = str((Path(base_dir) / cfg.cwd).resolve()) if cfg.cwd else None
    return UpstreamParams(
        name=name,
        command=cfg.command,
        args=tuple(cfg.args),
        env=dict(cfg.env),
        cwd=cwd,
        url=cfg.url,
        headers=dict(cfg.headers),
        timeout=cfg.timeout,
        connect_timeout=cfg.connect_timeout,
        protocol=cfg.protocol,
        tools=overrides,
        trust_hints=cfg.trust_hints,
        include=tuple(cfg.include) if cfg.include is not None else None,
        default_permissions=tuple(cfg.permissions) if cfg.permissions is not None else None,
        sandbox=sandbox_of(cfg.sandbox, base_dir),
        fence=Fence(cfg.fence),
        pins=cfg.pins,
    )


def build(config: GatewayConfig, *, ledger: str | None = None) -> Deployment:
    """Everything the configuration describes, not yet opened (use `async with`).

    Args:
        config: A validated configuration.
        ledger: Overrides `[server] ledger`.
    """
    budgets, limiter = _budgets(config.budgets)
    url = ledger or config.server.ledger
    keeper = Keeper(
        ledger=(
            open_store(url, pool_size=config.server.ledger_pool_size)
            if url.startswith(POSTGRES_SCHEMES)
            else url
        ),
        principal=Principal(id="gateway", grants=frozenset()),
        rules=[_rule(r, config.base_dir) for r in config.rules],
        budgets=budgets,
        rate_limiter=limiter,
        tool_threads=config.server.tool_threads,
        telemetry=_telemetry(config.server.telemetry),
    )
    owners: dict[str, str] = {}  # tool name -> the [[tools]] entry that registered it
    for index, entry in enumerate(config.tools):
        where = f"tools[{index}] ({entry.module or entry.file})"
        try:
            module = load_tool_module(entry, config.base_dir)
        except FileNotFoundError as exc:
            raise ConfigurationError(f"{where}: no such file: {exc.filename}") from exc
        except ModuleNotFoundError as exc:
            if entry.module is None or exc.name != entry.module.split(".")[0]:
                raise  # the module itself imports something missing: its traceback helps
            raise ConfigurationError(f"{where}: no module named {entry.module!r}") from exc
        register = getattr(module, "register", None)
        if not callable(register):
            raise ConfigurationError(f"{where}: the module defines no register(keeper)")
        changed: list[str] = []
        unsubscribe = keeper.catalog.subscribe(partial(_note_name, changed))
        try:
            register(keeper)
        finally:
            unsubscribe()
        for name in changed:
            earlier = owners.get(name)
            if earlier is not None and earlier != where:
                # The last one silently won (and with it its effect and permissions).
                raise ConfigurationError(f"{where}: registers {name!r}, as {earlier} does")
            owners[name] = where
    pins = Pins(
        lambda: keeper.store,
        audit=keeper.runtime.audit,
        hold_suspicious=config.server.hold_suspicious_tools,
        poll_interval=config.server.pins_poll_interval,
    )
    upstreams = [
        McpUpstream(upstream_params(name, cfg, config.base_dir), keeper.catalog, pins)
        for name, cfg in config.upstreams.items()
    ]
    sources = [http_source(name, cfg, config.base_dir) for name, cfg in config.http.items()]
    for source in sources:
        for tool in source.tools:
            keeper.add(tool)
    for name, cfg in config.commands.items():
        for tool in command_tools(name, cfg, config.base_dir):
            keeper.add(tool)
    principals = [
        GatewayPrincipal(
            principal=Principal(
                id=pid,
                tenant=p.tenant,
                environment=p.environment,
                grants=frozenset(p.grants),
                attributes=dict(p.attributes),
            ),
            token=p.token,
            exposure=p.exposure or config.server.exposure,
            approve_by_elicitation=p.approve_by_elicitation,
            client_task_ids=p.client_task_ids,
        )
        for pid, p in config.principals.items()
    ]
    by_source = {upstream.params.name: upstream for upstream in upstreams}

    def connected(source: str) -> bool:
        upstream = by_source.get(source)
        return upstream is None or upstream.connected

    gateway = Gateway(
        keeper,
        principals,
        name=config.server.name,
        connected=connected,
        max_result_chars=config.server.max_result_chars or None,
        repeat_window=config.server.repeat_window,
    )
    return Deployment(
        keeper, gateway, upstreams, sources, pins, Operators.from_config(config.operators)
    )
