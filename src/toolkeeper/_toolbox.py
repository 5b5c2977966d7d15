"""`Toolbox`: the tools of one application and who sees which, the catalog half of `Keeper`.

What it is: tools registered (`FunctionTools`), listed for a principal (`visible_tools`) and
searched (`select`, over a search index built on first use). What it is not: a runtime; it runs
and records no call, and it closes nothing itself: `Keeper` adds the ledger and the executor,
and closes the index with them.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import TYPE_CHECKING

import anyio

from .catalog.registry import Catalog
from .connectors.functions import FunctionTools
from .core.errors import ConfigurationError
from .core.values import Principal, ToolSpec
from .policy.grants import may_use

if TYPE_CHECKING:
    from .retrieval import FusionConfig, QueryAdapter, QueryContext, Selection, Selector
    from .retrieval.selector import Connected

__all__ = ["Toolbox"]


class Toolbox(FunctionTools):
    """A catalog of tools, the principal they are shown to by default, and their search index.

    Args:
        principal: Whose tools `visible_tools()` and `select()` show when given none.
        tool_threads: How many sync tool functions may run at once.
        selection: How `select` ranks and when it abstains.
        query_adapter: The map of `select`'s query vectors.
    """

    def __init__(
        self,
        *,
        principal: Principal | None,
        tool_threads: int,
        selection: FusionConfig | None,
        query_adapter: QueryAdapter | bool,
    ) -> None:
        self.catalog = Catalog()
        self.thread_limiter = anyio.CapacityLimiter(tool_threads)
        """The worker threads sync tools run in (`tool_threads` of them)."""
        self._principal = principal
        self._selection = selection
        self._query_adapter = query_adapter
        self._selector: Selector | None = None
        self._selector_lock = threading.Lock()

    def _is_closed(self) -> bool:
        """Whether the owner is closed (or closing): no search index is built any more."""
        return False

    def visible_tools(self, principal: Principal | None = None) -> list[ToolSpec]:
        """The specs a principal may see and call (all others are never shown to it).

        Raises:
            ConfigurationError: no principal is given and the keeper has no default one.
        """
        who = self._acting_for(principal, "visible_tools")
        return [spec for spec in self.catalog.specs() if may_use(who, spec)]

    def _acting_for(self, principal: Principal | None, method: str) -> Principal:
        """`principal`, else the keeper's own; never anyone's grants by default."""
        who = principal or self._principal
        if who is None:
            raise ConfigurationError(
                f"Keeper.{method}() needs a principal: pass principal=..., or give the keeper "
                "a default one (Keeper(principal=...))"
            )
        return who

    # -- retrieval (needs the `[retrieval]` extra) -----------------------------------------

    @property
    def selector(self) -> Selector:
        """The search index over this keeper's catalog, built on first use, following it
        until the keeper is closed (a closed keeper's selector answers no more searches)."""
        if self._selector is None:
            if self._is_closed():  # (one built now would never be closed)
                raise ConfigurationError("this Keeper is closed")
            with self._selector_lock:  # two threads' first selections build one index
                if self._selector is None:
                    self._selector = self.new_selector()
        return self._selector

    def new_selector(self, *, connected: Connected | None = None, dense: bool = True) -> Selector:
        """A search index of its own over this keeper's catalog, following it, that ranks and
        abstains as `select` does (the keeper's `selection` and `query_adapter`); the caller
        closes it. `connected` says whether a source is connected (its tools are left out
        while it is not); `dense=False` ranks by keywords alone, with no model.

        Raises:
            ImportError: the `[retrieval]` extra is not installed (for `dense`, its model).
        """
        from .retrieval import Selector

        if not dense:
            return Selector.for_catalog(
                self.catalog, embedder=None, connected=connected, config=self._selection
            )
        return Selector.default(
            self.catalog,
            connected=connected,
            config=self._selection,
            query_adapter=self._query_adapter,
        )

    def select(
        self,
        query: str,
        *,
        principal: Principal | None = None,
        k: int = 8,
        context: QueryContext | None = None,
    ) -> Selection:
        """The tools `principal` may use that best fit `query` (direct mode), e.g.
        `keeper.select(message, principal=p, k=8).to("anthropic")`.

        Raises:
            TypeError: `query` is not a str, or `context` not a `QueryContext`.
            ValueError: `k` is not a whole number of at least 1.
            ConfigurationError: the keeper is closed, or no principal is given and the keeper
                has no default one.
        """
        return self.selector.select(
            query, principal=self._acting_for(principal, "select"), k=k, context=context
        )

    async def aselect(
        self,
        query: str,
        *,
        principal: Principal | None = None,
        k: int = 8,
        context: QueryContext | None = None,
    ) -> Selection:
        """`select` for async code: the search (and the index build of the first one, which
        embeds every tool) runs on a worker thread, so the event loop is never blocked.

        Raises:
            TypeError, ValueError, ConfigurationError: as `select` raises them.
        """
        who = self._acting_for(principal, "aselect")
        search = partial(self.select, query, principal=who, k=k, context=context)
        return await anyio.to_thread.run_sync(search)
