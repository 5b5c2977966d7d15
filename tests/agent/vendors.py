"""What the adapters' tests share: a keeper with two tools, and a server that answers with a
list of vendor payloads in turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolkeeper import Keeper, Principal
from toolkeeper.ledger import MemoryStore
from toolkeeper.testing import Reply, VendorServer

ALICE = Principal(id="alice", grants=frozenset({"*"}))


def keeper_with_tools() -> tuple[Keeper, list[str]]:
    keeper = Keeper(ledger=MemoryStore())
    published: list[str] = []

    @keeper.tool(effect="read_only")
    def search(query: str) -> list[str]:
        """Search the documents."""
        return [f"doc about {query}"]

    @keeper.tool(effect="destructive")
    def publish(title: str) -> str:
        """Publish a report."""
        published.append(title)
        return f"published {title}"

    return keeper, published


def serving(replies: Sequence[Reply]) -> VendorServer:
    """A server answering each request with the next reply (the last one again after)."""
    left = list(replies)

    def handler(path: str, body: Any) -> Reply:
        return left.pop(0) if len(left) > 1 else left[0]

    return VendorServer(handler)


def sse(*events: tuple[str | None, Any]) -> Reply:
    return Reply(events=list(events))
