"""Property names a vendor refuses: renamed in exported schemas, named back in parsed calls.

Anthropic takes property names that match `^[a-zA-Z0-9_.-]{1,64}$` only and refuses the whole
request otherwise; MCP servers name parameters `$filter`, `page[size]` or `order by`. Such a
name is exported as one the vendor takes (its other characters made `_`, cut to length, a hash
of the original added when two would meet), and a call's arguments get their original names
back before the executor sees them. The renaming depends only on the names of one object's
properties, so export and parse agree without keeping any state.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..schema.losses import Action, Loss
from ..schema.validate import json_pointer
from ..schema.walker import (
    SCHEMA_LIST_KEYWORDS,
    SCHEMA_MAP_KEYWORDS,
    SCHEMA_VALUE_KEYWORDS,
    resolve_pointer,
)

__all__ = ["rename_properties", "restore_keys", "wire_keys"]

_MAX_DEPTH = 64


def wire_keys(names: Iterable[str], pattern: re.Pattern[str], limit: int) -> dict[str, str]:
    """Original → exported name for the properties of one object: a name the vendor takes is
    kept; another becomes one it takes, unique within the object, the same every time."""
    names = list(names)
    out = {name: name for name in names if pattern.match(name)}
    used = set(out)
    for name in names:
        if name in out:
            continue
        wire = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:limit] or "_"
        if wire in used or not pattern.match(wire):
            digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
            wire = f"{wire[: limit - 9]}_{digest[:8]}"
        while wire in used:  # (a hash that met another name)
            wire = f"{wire[: limit - 2]}_x"
        used.add(wire)
        out[name] = wire
    return out


def rename_properties(
    schema: dict[str, Any],
    pattern: re.Pattern[str],
    limit: int,
    target: str,
    losses: list[Loss],
) -> dict[str, Any]:
    """`schema` with every object's property names the vendor refuses renamed (and its
    `required` with them); each renaming is reported under `/input_schema`."""
    renamed: dict[str, Any] = _rename(schema, pattern, limit, target, losses, "/input_schema", 0)
    return renamed


def _rename(
    node: Any,
    pattern: re.Pattern[str],
    limit: int,
    target: str,
    losses: list[Loss],
    pointer: str,
    depth: int,
) -> Any:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return node
    out: dict[str, Any] = {}
    props = node.get("properties")
    names = wire_keys(props, pattern, limit) if isinstance(props, Mapping) else {}
    for keyword, value in node.items():
        here = f"{pointer}/{keyword}"
        if keyword == "properties" and isinstance(value, Mapping):
            out[keyword] = {}
            for name, sub in value.items():
                at = here + json_pointer([name])
                if names[name] != name:
                    losses.append(
                        Loss(
                            pointer=at,
                            keyword="properties",
                            action=Action.REWRITTEN,
                            reason=f"{target} property names must match {pattern.pattern}; "
                            f"sent as {names[name]!r} and named back in calls",
                        )
                    )
                out[keyword][names[name]] = _rename(
                    sub, pattern, limit, target, losses, at, depth + 1
                )
        elif keyword == "required" and isinstance(value, list):
            out[keyword] = [names.get(n, n) if isinstance(n, str) else n for n in value]
        elif keyword in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            out[keyword] = {
                k: _rename(v, pattern, limit, target, losses, here + json_pointer([k]), depth + 1)
                for k, v in value.items()
            }
        elif keyword in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            out[keyword] = [
                _rename(v, pattern, limit, target, losses, f"{here}/{i}", depth + 1)
                for i, v in enumerate(value)
            ]
        elif keyword in SCHEMA_VALUE_KEYWORDS:
            out[keyword] = _rename(value, pattern, limit, target, losses, here, depth + 1)
        else:
            out[keyword] = value
    return out


def restore_keys(
    value: Any, schema: Mapping[str, Any], pattern: re.Pattern[str], limit: int
) -> Any:
    """A call's `value` with the property names `rename_properties` exported named back,
    following `schema` (the tool's own input schema)."""
    return _restore(value, schema, schema, pattern, limit, 0)


def _deref(node: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(8):
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str):
            break
        node = resolve_pointer(root, ref)
    return node


def _shapes(node: Any, root: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """`node` and the branches of its choices that carry `key`, references followed."""
    node = _deref(node, root)
    if not isinstance(node, Mapping):
        return []
    found = [node] if key in node else []
    for keyword in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(keyword) or ():
            found.extend(_shapes(branch, root, key))
    return found


def _restore(
    value: Any,
    node: Any,
    root: Mapping[str, Any],
    pattern: re.Pattern[str],
    limit: int,
    depth: int,
) -> Any:
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        best: tuple[int, dict[str, str], Mapping[str, Any]] | None = None
        for shape in _shapes(node, root, "properties"):
            props = shape["properties"]
            if not isinstance(props, Mapping):
                continue
            back = {wire: name for name, wire in wire_keys(props, pattern, limit).items()}
            fit = sum(key in back for key in value)
            if best is None or fit > best[0]:
                best = (fit, back, props)
        if best is None:
            return value
        _, back, props = best
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = back.get(key, key) if isinstance(key, str) else key
            out[name] = _restore(item, props.get(name), root, pattern, limit, depth + 1)
        return out
    if isinstance(value, list):
        shapes = _shapes(node, root, "items")
        items = shapes[0]["items"] if shapes else None
        return [_restore(v, items, root, pattern, limit, depth + 1) for v in value]
    return value
