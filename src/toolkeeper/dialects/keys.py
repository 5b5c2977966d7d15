"""Property names a vendor refuses: renamed in exported schemas, named back in parsed calls.

Anthropic takes property names that match `^[a-zA-Z0-9_.-]{1,64}$` only and refuses the whole
request otherwise; MCP servers name parameters `$filter`, `page[size]` or `order by`. Such a
name is exported as one the vendor takes (its other characters made `_`, cut to length, a hash
of the original added when two would meet), and a call's arguments get their original names
back before the executor sees them. The renaming depends only on the names of one object's
properties, so export and parse agree without keeping any state; `translate` follows every
schema that applies at a place (references with their siblings, every part of a choice or a
condition, pattern and additional properties, tuple positions) as the renaming reached them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..schema.losses import Action, Loss
from ..schema.validate import json_pointer, pointer_parts
from ..schema.walker import (
    SCHEMA_LIST_KEYWORDS,
    SCHEMA_MAP_KEYWORDS,
    SCHEMA_VALUE_KEYWORDS,
    resolve_pointer,
)

__all__ = ["exported_pointer", "rename_properties", "translate", "wire_keys"]

_MAX_DEPTH = 64
_MAX_SHAPES = 64


def wire_keys(names: Iterable[str], pattern: re.Pattern[str], limit: int) -> dict[str, str]:
    """Original → exported name for the properties of one object: a name the vendor takes is
    kept; another becomes one it takes, unique within the object, the same every time."""
    names = list(names)
    out = {name: name for name in names if pattern.fullmatch(name)}
    used = set(out)
    for name in names:
        if name in out:
            continue
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:limit] or "_"
        wire = base
        if wire in used or not pattern.fullmatch(wire):
            digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            for n in range(len(names) + 1):  # (a hash that met another name: a counter)
                suffix = f"_{digest}" if n == 0 else f"_{digest}_{n}"
                wire = f"{base[: limit - len(suffix)]}{suffix}"
                if wire not in used:
                    break
        used.add(wire)
        out[name] = wire
    return out


def _name_map(
    node: Mapping[str, Any], pattern: re.Pattern[str], limit: int
) -> Callable[[str], str]:
    """How names are exported at `node`: by its own properties' renaming, and a name they do
    not hold (a `required` in a branch naming its parent's property) as it would be alone."""
    props = node.get("properties")
    own = wire_keys(props, pattern, limit) if isinstance(props, Mapping) else {}

    def name(original: str) -> str:
        found = own.get(original)
        return found if found is not None else wire_keys([original], pattern, limit)[original]

    return name


def rename_properties(
    schema: dict[str, Any],
    pattern: re.Pattern[str],
    limit: int,
    target: str,
    losses: list[Loss],
) -> dict[str, Any]:
    """`schema` with every object's property names the vendor refuses renamed (and its
    `required`, `dependentRequired` and `dependentSchemas` with them); each renaming is
    reported under `/input_schema`."""
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
    name = _name_map(node, pattern, limit)
    out: dict[str, Any] = {}
    for keyword, value in node.items():
        here = f"{pointer}/{keyword}"
        if keyword == "properties" and isinstance(value, Mapping):
            out[keyword] = {}
            for original, sub in value.items():
                at = here + json_pointer([original])
                wire = name(original)
                if wire != original:
                    losses.append(
                        Loss(
                            pointer=at,
                            keyword="properties",
                            action=Action.REWRITTEN,
                            reason=f"{target} property names must match {pattern.pattern}; "
                            f"sent as {wire!r} and named back in calls",
                        )
                    )
                out[keyword][wire] = _rename(sub, pattern, limit, target, losses, at, depth + 1)
        elif keyword == "required" and isinstance(value, list):
            out[keyword] = [name(n) if isinstance(n, str) else n for n in value]
        elif keyword == "dependentRequired" and isinstance(value, Mapping):
            out[keyword] = {
                name(k): [name(n) if isinstance(n, str) else n for n in v]
                if isinstance(v, list)
                else v
                for k, v in value.items()
            }
        elif keyword == "dependentSchemas" and isinstance(value, Mapping):
            out[keyword] = {
                name(k): _rename(v, pattern, limit, target, losses, here + json_pointer([k]), depth)
                for k, v in value.items()
            }
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


def translate(
    value: Any,
    schema: Mapping[str, Any],
    pattern: re.Pattern[str],
    limit: int,
    *,
    exported: bool,
) -> Any:
    """`value` (arguments, an example) with its property names translated along `schema`
    (the tool's own input schema): to the exported names when `exported`, else back from
    them to the tool's own."""
    return _translate(value, [schema], schema, pattern, limit, exported, 0)


def _applying(nodes: Iterable[Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every schema that applies where `nodes` do: references followed (their siblings kept),
    every part of a choice or a condition."""
    out: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    stack = list(nodes)
    while stack and len(out) < _MAX_SHAPES:
        node = stack.pop(0)
        if not isinstance(node, Mapping) or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            stack.append(resolve_pointer(root, ref))
        for keyword in ("allOf", "anyOf", "oneOf"):
            parts = node.get(keyword)
            if isinstance(parts, list):
                stack.extend(parts)
        stack.extend(node.get(k) for k in ("then", "else"))
        dependent = node.get("dependentSchemas")
        if isinstance(dependent, Mapping):
            stack.extend(dependent.values())
    return out


def _translate(
    value: Any,
    nodes: list[Any],
    root: Mapping[str, Any],
    pattern: re.Pattern[str],
    limit: int,
    exported: bool,
    depth: int,
) -> Any:
    if depth > _MAX_DEPTH or not isinstance(value, Mapping | list):
        return value
    shapes = _applying(nodes, root)
    if isinstance(value, list):
        return [
            _translate(item, _item_schemas(shapes, i), root, pattern, limit, exported, depth + 1)
            for i, item in enumerate(value)
        ]
    names = _names(shapes, pattern, limit, exported)  # the name in `value` -> what it becomes
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = names.get(key, key) if isinstance(key, str) else key
        subs = _property_schemas(shapes, key if exported else name)  # by the tool's own name
        out[name] = _translate(item, subs, root, pattern, limit, exported, depth + 1)
    return out


def _item_schemas(shapes: list[Mapping[str, Any]], index: int) -> list[Any]:
    """The schemas of an array's item at `index` in `shapes` (its tuple position, or items)."""
    subs: list[Any] = []
    for shape in shapes:
        prefix = shape.get("prefixItems")
        if isinstance(prefix, list) and index < len(prefix):
            subs.append(prefix[index])
        elif isinstance(shape.get("items"), Mapping):
            subs.append(shape["items"])
    return subs


def _names(
    shapes: list[Mapping[str, Any]], pattern: re.Pattern[str], limit: int, exported: bool
) -> dict[str, str]:
    """The property names of an object that `shapes` describe: the tool's own → exported
    when `exported`, else exported → the tool's own."""
    names: dict[str, str] = {}
    for shape in shapes:
        props = shape.get("properties")
        if isinstance(props, Mapping):
            for original, wire in wire_keys(props, pattern, limit).items():
                if exported:
                    names.setdefault(original, wire)
                else:
                    names.setdefault(wire, original)
    return names


def exported_pointer(
    pointer: str, schema: Mapping[str, Any], pattern: re.Pattern[str], limit: int
) -> str:
    """A JSON pointer into a call's arguments (the tool's own names) in the exported names."""
    nodes: list[Any] = [schema]
    out: list[str] = []
    for part in pointer_parts(pointer)[:_MAX_DEPTH]:
        shapes = _applying(nodes, schema)
        items = _item_schemas(shapes, int(part)) if part.isdigit() else []
        if items:
            out.append(part)
            nodes = items
            continue
        out.append(_names(shapes, pattern, limit, exported=True).get(part, part))
        nodes = _property_schemas(shapes, part)
    return json_pointer(out)


def _property_schemas(shapes: list[Mapping[str, Any]], name: Any) -> list[Any]:
    """The schemas of property `name` (the tool's own name) in `shapes`: where it is declared,
    else the pattern and additional properties it falls under."""
    declared = [
        shape["properties"][name]
        for shape in shapes
        if isinstance(shape.get("properties"), Mapping) and name in shape["properties"]
    ]
    if declared or not isinstance(name, str):
        return declared
    found: list[Any] = []
    for shape in shapes:
        patterns = shape.get("patternProperties")
        if isinstance(patterns, Mapping):
            for regex, sub in patterns.items():
                try:
                    if re.search(regex, name):
                        found.append(sub)
                except (re.error, TypeError):
                    continue
        extra = shape.get("additionalProperties")
        if isinstance(extra, Mapping):
            found.append(extra)
    return found
