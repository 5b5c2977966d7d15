"""The registry of tools from every source."""

from .registry import Catalog, CatalogEvent, ChangeKind, Reconciler, ResourceKey, Tool

__all__ = ["Catalog", "CatalogEvent", "ChangeKind", "Reconciler", "ResourceKey", "Tool"]
