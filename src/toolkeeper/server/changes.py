"""Telling connected clients that the tool list changed.

When the catalog changes (an upstream added or dropped a tool, a module registered one), MCP
clients are told to list again: 2025-era sessions with `notifications/tools/list_changed`,
2026-07-28 clients through their `subscriptions/listen` stream. The catalog calls back
synchronously; the notifications go out from the transport's task (`run`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.subscriptions import ListenHandler
from mcp.shared.subscriptions import ServerEvent, ToolsListChanged

from ..catalog.registry import Catalog, CatalogEvent

__all__ = ["ToolListChanges"]


class ToolListChanges:
    """A subscription bus for `subscriptions/listen` plus the legacy sessions seen so far."""

    def __init__(self, catalog: Catalog) -> None:
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._changed = anyio.Event()
        self._handlers: list[ListenHandler] = []
        self._unsubscribe = catalog.subscribe(self._on_change)

    def listen_handler(self) -> ListenHandler:
        """The `subscriptions/listen` handler of one server, fed by this bus."""
        handler = ListenHandler(self)
        self._handlers.append(handler)
        return handler

    def end_streams(self) -> None:
        """End every open listen stream gracefully: a server shutting down must not wait for
        clients that listen for as long as they are connected."""
        for handler in self._handlers:
            handler.close()

    # SubscriptionBus (the SDK's ListenHandler subscribes here)
    async def publish(self, event: ServerEvent) -> None:
        """Deliver `event` to every listen stream."""
        self._fan_out(event)
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Register a listen stream's listener; returns its unsubscribe function."""
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None

    def seen(self, connection: Any) -> None:
        """Remember a handshake-era client connection (held weakly) to notify later."""
        if connection is not None:
            self._sessions.add(connection)

    async def run(self) -> None:
        """Notify the handshake-era sessions whenever the catalog changed; runs until
        cancelled. (Listen streams are told at once, without it.)"""
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            for session in list(self._sessions):
                try:
                    await session.send_tool_list_changed()
                except Exception:  # a gone client must not stop the others
                    self._sessions.discard(session)

    def close(self) -> None:
        """Stop following the catalog, and end the listen streams."""
        self._unsubscribe()
        self.end_streams()

    def _on_change(self, event: CatalogEvent) -> None:
        self._fan_out(ToolsListChanged())
        self._changed.set()

    def _fan_out(self, event: ServerEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # one broken stream must not starve the others
                continue
