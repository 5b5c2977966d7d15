"""Opt-in coercion of arguments that almost match their schema, recording every change.

Models (and datasets) send `2.0` for an integer, `"37.5"` for a number, `"true"` for a
boolean, or `null` for an optional argument they mean to leave out. A validator is right to
reject them; a caller that prefers to accept them runs `coerce` first, explicitly, and keeps
the `Coercion` records (the executor puts them in the result's metadata) so that nothing is
changed silently. A value that already has an accepted type is never touched (except an
integral float for an integer: valid JSON Schema, but the tool's code expects an int), and
nothing is guessed: a string that is not a number stays a string and fails validation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .validate import json_pointer
from .walker import resolve_pointer

__all__ = ["Coerced", "Coercion", "coerce"]

_MAX_DEPTH = 32


@dataclass(frozen=True, kw_only=True, slots=True)
class Coercion:
    """One argument value that was changed to match its schema."""

    pointer: str
    """JSON pointer to the argument."""
    rule: str
    """`integral_float`, `numeric_string`, `boolean_string` or `null_for_optional`."""
    before: Any
    """The value as sent."""
    after: Any
    """The value after coercion (absent for `null_for_optional`: the key is removed)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form recorded in result metadata."""
        return {
            "pointer": self.pointer,
            "rule": self.rule,
            "before": self.before,
            "after": self.after,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Coerced:
    """Arguments after coercion, with what was changed."""

    value: Any
    """The coerced arguments (a new object; the input is not modified)."""
    coercions: tuple[Coercion, ...] = ()
    """Every change, in document order; empty when nothing needed coercing."""


def _types(schema: Mapping[str, Any]) -> set[str]:
    value = schema.get("type")
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {str(t) for t in value}
    return set()


def _accepts(types: set[str], value: Any) -> bool:
    if not types:
        return True
    if value is None:
        return "null" in types
    if isinstance(value, bool):
        return "boolean" in types
    if isinstance(value, int):
        return bool(types & {"integer", "number"})
    if isinstance(value, float):
        # 2.0 is a valid JSON Schema integer, but the tool's code expects an int.
        return "number" in types
    if isinstance(value, str):
        return "string" in types
    if isinstance(value, list):
        return "array" in types
    if isinstance(value, Mapping):
        return "object" in types
    return False


def _number(text: str) -> int | float | None:
    try:
        number = float(text.strip())
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    if number.is_integer() and "." not in text and "e" not in text.lower():
        return int(text.strip())
    return number


class _Coercer:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.records: list[Coercion] = []

    def resolve(self, schema: Any) -> Any:
        for _ in range(_MAX_DEPTH):
            if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
                break
            target = resolve_pointer(self.root, schema["$ref"])
            if not isinstance(target, Mapping):
                break
            schema = target
        return schema

    def value(self, value: Any, schema: Any, path: list[str | int], depth: int) -> Any:
        schema = self.resolve(schema)
        if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
            return value
        types = _types(schema)
        if not _accepts(types, value):
            value = self.scalar(value, types, path)
        if isinstance(value, Mapping):
            return self.object(value, schema, path, depth)
        if isinstance(value, list):
            prefix = schema.get("prefixItems") or []
            items = schema.get("items")
            return [
                self.value(v, prefix[i] if i < len(prefix) else items, [*path, i], depth + 1)
                for i, v in enumerate(value)
            ]
        return value

    def scalar(self, value: Any, types: set[str], path: list[str | int]) -> Any:
        rule, after = None, value
        if isinstance(value, float) and value.is_integer() and "integer" in types:
            rule, after = "integral_float", int(value)
        elif isinstance(value, str) and types & {"integer", "number"}:
            number = _number(value)
            if number is not None and ("number" in types or float(number).is_integer()):
                rule = "numeric_string"
                after = int(number) if "number" not in types else number
        elif isinstance(value, str) and "boolean" in types and value.lower() in ("true", "false"):
            rule, after = "boolean_string", value.lower() == "true"
        if rule is None:
            return value
        self.records.append(
            Coercion(pointer=json_pointer(path), rule=rule, before=value, after=after)
        )
        return after

    def object(
        self,
        value: Mapping[str, Any],
        schema: Mapping[str, Any],
        path: list[str | int],
        depth: int,
    ) -> dict[str, Any]:
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, Mapping) else None)
            resolved = self.resolve(sub)
            if (
                item is None
                and key in props
                and key not in required
                and isinstance(resolved, Mapping)
                and not _accepts(_types(resolved), None)
                and _types(resolved)
            ):
                self.records.append(
                    Coercion(
                        pointer=json_pointer([*path, key]),
                        rule="null_for_optional",
                        before=None,
                        after=None,
                    )
                )
                continue
            out[key] = self.value(item, sub, [*path, key], depth + 1) if sub is not None else item
        return out


def coerce(schema: Mapping[str, Any], arguments: Any) -> Coerced:
    """`arguments` with near-misses coerced to `schema`'s types, and the list of changes.

    Rules, applied only where a value's type is not accepted: an integral float where an
    integer is expected (`integral_float`); a numeric string where a number or integer is
    expected (`numeric_string`); `"true"`/`"false"` where a boolean is expected
    (`boolean_string`); `null` for an optional property that does not accept null is removed
    (`null_for_optional`).
    """
    coercer = _Coercer(schema)
    value = coercer.value(arguments, schema, [], 0)
    return Coerced(value=value, coercions=tuple(coercer.records))
