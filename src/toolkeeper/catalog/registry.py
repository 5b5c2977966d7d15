"""The catalog: every tool the runtime knows, from every source, with its runtime binding.

What it is: a registry of `Tool`s (a `ToolSpec` plus the trusted pieces that run and guard
it), keyed by name, versioned, and observable: every add, change and removal is an event that
indexes (search) and caches (validators) follow incrementally. What it is not: a policy
decision (see `toolkeeper.policy`) or a search index (see `toolkeeper.retrieval`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..core.connector import Connector
from ..core.errors import ConfigurationError
from ..core.retry import RetryPolicy
from ..core.values import CallContext, ToolSpec

__all__ = ["Catalog", "CatalogEvent", "ChangeKind", "Reconciler", "ResourceKey", "Tool"]

Reconciler = Callable[[CallContext], Any]
"""Looks up the real outcome of a call by its idempotency key: returns (or awaits to) a
`ToolResult`, or None when the outcome cannot be told."""

ResourceKey = Callable[[Mapping[str, Any]], str | Sequence[str] | None]
"""Names the resource(s) a call writes, from its validated arguments; two calls that write a
same resource never run at the same time."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool as the runtime holds it: its contract and the trusted pieces around it."""

    spec: ToolSpec
    """The contract (model-visible fields and runtime facts)."""
    connector: Connector
    """What runs it."""
    rules: tuple[Any, ...] = ()
    """Business rules (`toolkeeper.policy.Rule`) checked for every call of this tool."""
    reconcile: Reconciler | None = None
    """Looks up the outcome of a call left UNKNOWN_OUTCOME."""
    writes: ResourceKey | None = None
    """The resources a call writes, for conflict detection in parallel batches."""
    retry: RetryPolicy | None = None
    """Overrides the executor's retry policy for this tool."""
    sensitive: frozenset[str] = field(default_factory=frozenset)
    """JSON pointers of arguments to redact in the ledger and audit, beyond those the schema
    marks `writeOnly` or `x-sensitive`."""

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.spec.name


class ChangeKind(StrEnum):
    """What happened to a tool in the catalog."""

    ADDED = "added"
    CHANGED = "changed"
    REMOVED = "removed"


@dataclass(frozen=True, kw_only=True, slots=True)
class CatalogEvent:
    """One change of the catalog."""

    kind: ChangeKind
    """Added, changed or removed."""
    tool: Tool
    """The tool after the change (for a removal: the tool removed)."""
    previous: Tool | None = None
    """The tool before a change."""


Listener = Callable[[CatalogEvent], None]


class Catalog:
    """Tools by name. Adding a tool under a taken name replaces it (a change event)."""

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._listeners: list[Listener] = []
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Add or replace a tool and notify listeners."""
        if not tool.spec.name:
            raise ConfigurationError("a tool needs a name")
        previous = self._tools.get(tool.spec.name)
        self._tools[tool.spec.name] = tool
        kind = ChangeKind.ADDED if previous is None else ChangeKind.CHANGED
        self._emit(CatalogEvent(kind=kind, tool=tool, previous=previous))

    def remove(self, name: str) -> Tool | None:
        """Remove a tool by name; returns it, or None if there was none."""
        tool = self._tools.pop(name, None)
        if tool is not None:
            self._emit(CatalogEvent(kind=ChangeKind.REMOVED, tool=tool))
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool with this name, or None."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        """Every tool's spec, in insertion order."""
        # (through `__iter__`, which copies the tools in one step: a tool added on another
        # thread while the specs are read would otherwise end the loop, "dictionary changed size")
        return [t.spec for t in self]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` on every change; returns a function that unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, event: CatalogEvent) -> None:
        for listener in list(self._listeners):
            listener(event)
