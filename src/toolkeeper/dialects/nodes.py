"""Reading and rewriting one JSON Schema node, as every format's transformer does.

`types_of` and `is_nullable` read a node; `nullable` widens one to accept null; the rewrites
`tuple_as_items` and `one_of_as_any_of` change a node in place for a format that lacks a
keyword, and report it through the walker that calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema.losses import Action
from ..schema.walker import SchemaWalker

__all__ = ["is_nullable", "nullable", "one_of_as_any_of", "tuple_as_items", "types_of"]


def types_of(node: Mapping[str, Any]) -> list[str]:
    """The `type` of a schema node as a list (empty when it has none)."""
    value = node.get("type")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(t) for t in value]
    return []


def is_nullable(node: Any) -> bool:
    """True when the node (shallowly) accepts null; an unconstrained node accepts anything."""
    if not isinstance(node, Mapping):
        return node is True
    if not any(k in node for k in ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref")):
        return True
    if "null" in types_of(node):
        return True
    if "enum" in node and None in node["enum"]:
        return True
    if "const" in node and node["const"] is None:
        return True
    return any(is_nullable(branch) for branch in node.get("anyOf", ()) or ())


def nullable(node: Any) -> Any:
    """The node widened to also accept null."""
    if not isinstance(node, dict) or is_nullable(node):
        return node
    types = types_of(node)
    if types and "$ref" not in node and "anyOf" not in node:
        out = dict(node)
        out["type"] = [*types, "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "const" in out:
            out["enum"] = [out.pop("const"), None]
        return out
    if "anyOf" in node and not types and "$ref" not in node:
        return node | {"anyOf": [*node["anyOf"], {"type": "null"}]}
    inner = {k: v for k, v in node.items() if k not in ("description", "title")}
    out = {k: v for k, v in node.items() if k in ("description", "title")}
    out["anyOf"] = [inner, {"type": "null"}]
    return out


def tuple_as_items(walker: SchemaWalker, node: dict[str, Any], pointer: str) -> None:
    """Give an array that has no `items` (OpenAI refuses it) the union of its tuple's types."""
    prefix = node.get("prefixItems")
    if not isinstance(prefix, list) or not prefix or node.get("items") not in (None, False):
        return
    closed = node.get("items") is False
    del node["prefixItems"]
    kinds: list[Any] = []
    for item in prefix:
        if item not in kinds:
            kinds.append(item)
    node["items"] = kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
    if closed:
        node.setdefault("maxItems", len(prefix))
    walker.loss(
        pointer + "/prefixItems",
        "prefixItems",
        Action.REWRITTEN,
        f"{walker.target} takes no tuple positions: each item may be any of the tuple's "
        "types (each call is still checked position by position)",
    )


def one_of_as_any_of(walker: SchemaWalker, node: dict[str, Any], pointer: str, why: str) -> None:
    """Rewrite `oneOf` (exactly one branch) as `anyOf` (at least one), reporting the loss."""
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
        walker.loss(
            pointer + "/oneOf", "oneOf", Action.REWRITTEN, f"{why} (several branches may match)"
        )
