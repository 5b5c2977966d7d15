"""Python functions as catalog tools: the `tool` decorator and `add_function`.

What it is: `FunctionTools`, the registering half of `Keeper`: a function's input and output
schemas from its signature and docstring, its `ToolSpec` from the options, and a
`FunctionConnector` that runs it (a sync one in the owner's worker threads). What it is not: a
catalog; the class built on it holds one (`catalog`), and the threads (`thread_limiter`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

import anyio

from ..catalog.registry import Catalog, Reconciler, ResourceKey, Tool
from ..core.errors import ConfigurationError
from ..core.retry import RetryPolicy
from ..core.values import Effect, Fence, ToolSpec
from ..schema.from_callable import function_schema
from .python import FunctionConnector

__all__ = ["FunctionTools"]

F = TypeVar("F", bound=Callable[..., Any])


class FunctionTools:
    """Registers tools, Python functions (sync or async) among them, in `catalog`: a base
    class, whose subclass sets `catalog` and `thread_limiter`."""

    catalog: Catalog
    """Where tools are registered."""
    thread_limiter: anyio.CapacityLimiter
    """The worker threads sync tools run in."""

    @overload
    def tool(self, func: F, /) -> F: ...

    @overload
    def tool(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect | str = Effect.WRITE,
        idempotent: bool = False,
        permissions: Iterable[str] = (),
        tags: Iterable[str] = (),
        aliases: Iterable[str] = (),
        examples: Iterable[Mapping[str, Any]] = (),
        version: str = "1",
        timeout: float = 30.0,
        environments: Iterable[str] | None = None,
        tenants: Iterable[str] | None = None,
        rules: Iterable[Any] = (),
        writes: ResourceKey | None = None,
        reconcile: Reconciler | None = None,
        retry: RetryPolicy | None = None,
        title: str | None = None,
        fence: Fence | str = Fence.NONE,
    ) -> Callable[[F], F]: ...

    def tool(self, func: F | None = None, /, **options: Any) -> F | Callable[[F], F]:
        """Register a Python function (sync or async) as a tool.

        The input schema comes from the type hints and the Google-style docstring; the output
        schema from the return annotation (a generator function's: the list of what it yields,
        which is what its call returns). Options are `ToolSpec` fields plus `rules`,
        `writes` (resources a call writes, for parallel batches), `reconcile` (looks up an
        unknown outcome by idempotency key) and `retry`. `fence` (`mark`, `scan`) fences its
        output as data for a model: for a function that returns what others wrote (a web
        page, an email). Undeclared tools are assumed to write.

        Returns:
            The function itself, unchanged.
        """

        def register(fn: F) -> F:
            self.add_function(fn, **options)
            return fn

        return register(func) if func is not None else register

    def add_function(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect | str = Effect.WRITE,
        idempotent: bool = False,
        permissions: Iterable[str] = (),
        tags: Iterable[str] = (),
        aliases: Iterable[str] = (),
        examples: Iterable[Mapping[str, Any]] = (),
        version: str = "1",
        timeout: float = 30.0,
        environments: Iterable[str] | None = None,
        tenants: Iterable[str] | None = None,
        rules: Iterable[Any] = (),
        writes: ResourceKey | None = None,
        reconcile: Reconciler | None = None,
        retry: RetryPolicy | None = None,
        title: str | None = None,
        fence: Fence | str = Fence.NONE,
    ) -> Tool:
        """Register a Python function as a tool (the non-decorator form of `tool`).

        Raises:
            ConfigurationError: the function cannot be a tool (its parameters cannot be
                described), it is a lambda and no `name` is given, or `timeout` is not a
                positive, finite number.
        """
        if not name and getattr(func, "__name__", None) == "<lambda>":
            # (every lambda is "<lambda>": a second would replace the first without a word; an
            # empty name, as a config's missing one, falls back to it just as None does)
            raise ConfigurationError(
                "a lambda has no name a model could call it by; give it one: "
                "add_function(fn, name='lookup_order')"
            )
        schema = function_schema(func)
        # (NaN or inf would be no timeout at all: a tool that hangs would hold its call for ever)
        if not 0 < timeout < math.inf:
            raise ConfigurationError("timeout must be a positive, finite number of seconds")
        spec = ToolSpec(
            name=name or func.__name__,
            title=title,
            description=description if description is not None else schema.description,
            input_schema=schema.input_schema,
            output_schema=schema.output_schema,
            effect=Effect(effect),
            idempotent=idempotent,
            permissions=tuple(permissions),
            tags=tuple(tags),
            aliases=tuple(aliases),
            examples=tuple(dict(e) for e in examples),
            version=version,
            timeout=timeout,
            environments=frozenset(environments) if environments is not None else None,
            tenants=frozenset(tenants) if tenants is not None else None,
            source="python",
            fence=Fence(fence),
        )
        tool = Tool(
            spec=spec,
            connector=FunctionConnector(func, schema, limiter=self.thread_limiter),
            rules=tuple(rules),
            reconcile=reconcile,
            writes=writes,
            retry=retry,
        )
        self.catalog.add(tool)
        return tool

    def add(self, tool: Tool) -> None:
        """Register a tool built elsewhere (an upstream MCP tool, an HTTP operation...)."""
        self.catalog.add(tool)
