"""Reading a vendor's JSON defensively, as every dialect does.

Plain copies of SDK objects (`plain`), objects and arrays that may be absent or of another
type (`mapping`, `items_of`, `first`), a model's arguments as it produced them
(`arguments_of`), and the fields of a function definition (`function_fields`, its `strict`:
`strict_metadata` and `declared_strict`). Nothing here raises on what a response holds but
`function_fields`, which tells a function definition from a vendor's own tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.values import ToolSpec

__all__ = [
    "NotAFunction",
    "arguments_of",
    "declared_strict",
    "first",
    "function_fields",
    "items_of",
    "mapping",
    "plain",
    "strict_metadata",
]


class NotAFunction(ValueError):
    """What was given to import is no function definition: a vendor's own tool (web search,
    code execution...), which has no schema, or something that is not a tool at all."""


def function_fields(
    data: Any, vendor: str, *, types: tuple[str | None, ...] = (None, "function")
) -> Mapping[str, Any]:
    """`data` when it is a function definition of `vendor` (its `type` one of `types`).

    Raises:
        NotAFunction: it is a vendor's own tool, or has no name.
    """
    if not isinstance(data, Mapping):
        raise NotAFunction(
            f"tool definitions for {vendor} are JSON objects, not {type(data).__name__}"
        )
    kind = data.get("type")
    if kind not in types:
        raise NotAFunction(
            f"{kind!r} is one of {vendor}'s own tools, not a function definition: "
            "it has no schema to import"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        keys = ", ".join(sorted(map(str, data))) or "nothing"
        raise NotAFunction(f"a function definition for {vendor} needs a name (it has {keys})")
    return data


_PLAIN_DEPTH = 64
"""How deep `plain` looks for SDK objects: deeper lie only a model's arguments."""


def plain(obj: Any, depth: int = 0) -> Any:
    """A JSON-compatible copy of `obj`: SDK (pydantic) objects are dumped by their wire names.

    What lies deeper than `_PLAIN_DEPTH` is left as it is: arguments a model nested a few
    hundred levels deep must reach the executor (which refuses them), not stop the parse.
    """
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", by_alias=True, exclude_none=True)
        except ValueError:  # pydantic writes JSON at most 255 levels deep
            return dump(by_alias=True, exclude_none=True)
    if depth > _PLAIN_DEPTH:
        return obj
    if isinstance(obj, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v, depth + 1) for v in obj]
    return obj


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an empty one (responses are read defensively)."""
    return value if isinstance(value, Mapping) else {}


def items_of(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return list(value) if isinstance(value, list | tuple) else []


def first(value: Any) -> Mapping[str, Any]:
    """The first element of a JSON array when it is an object, else an empty object."""
    items = items_of(value)
    return mapping(items[0]) if items else {}


def arguments_of(raw: Any) -> Mapping[str, Any] | str:
    """Arguments as a model produced them: a JSON object, or the raw text when it is not one."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return raw
        return dict(value) if isinstance(value, dict) else raw
    return json.dumps(raw, default=str)


def declared_strict(spec: ToolSpec) -> bool | None:
    """Whether the tool's source asked for strict mode (`"strict"` of an OpenAI or Anthropic
    definition, kept in `metadata["strict"]` on import), or None when it did not say."""
    value = spec.metadata.get("strict")
    return value if isinstance(value, bool) else None


def strict_metadata(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The `metadata` of a spec imported from `definition`: its `strict` when it says true or
    false (null, or no `strict`, leaves the vendor's default)."""
    value = definition.get("strict")
    return {"strict": value} if isinstance(value, bool) else {}
