"""Compiled argument validators (JSON Schema 2020-12 via jsonschema-rs) and default filling.

Validation reports *every* violation with a JSON pointer to the faulty argument, so that a
model can fix all of them in one go. Validators are compiled once per schema (keyed by the
schema's canonical digest) and cached.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema_rs

from .canonical import canonical_json

__all__ = [
    "SchemaError",
    "Validator",
    "Violation",
    "apply_defaults",
    "compile_validator",
    "json_pointer",
    "pointer_parts",
    "resolve_ref",
    "violations_text",
]

_MAX_MESSAGE = 300


@dataclass(frozen=True, kw_only=True, slots=True)
class Violation:
    """One reason arguments do not match their schema."""

    pointer: str
    """JSON pointer (RFC 6901) to the faulty argument; for a missing one, where it belongs."""
    keyword: str
    """The schema keyword that failed (`type`, `required`, `enum`, ...)."""
    message: str
    """What is wrong, for the model."""

    def to_dict(self) -> dict[str, str]:
        """JSON form, as carried in `INVALID_ARGUMENTS` details."""
        return {"pointer": self.pointer, "keyword": self.keyword, "message": self.message}


def violations_text(violations: Sequence[Violation]) -> str:
    """The message of an `INVALID_ARGUMENTS` refusal: its first ten violations, each as
    `pointer: what is wrong`."""
    return "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:10])


def json_pointer(parts: Sequence[str | int]) -> str:
    """The RFC 6901 pointer of a path."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def pointer_parts(pointer: str) -> list[str]:
    """The path an RFC 6901 pointer names (its reference tokens, unescaped)."""
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def _date_time(text: str) -> bool:
    """RFC 3339 date-time, except that the UTC offset may be left out: Python's `datetime`
    takes such a value (a naive time), models often write one, and a tool built from a
    function shows such defaults. A date alone, or a leap second, is still refused."""
    if len(text) < 16 or text[10] not in "Tt ":
        return False
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


_FORMATS = {"date-time": _date_time}


class Validator:
    """A compiled validator for one schema."""

    __slots__ = ("_inner", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        try:
            self._inner = jsonschema_rs.validator_for(
                dict(schema), validate_formats=True, offline=True, formats=_FORMATS
            )
        except jsonschema_rs.ValidationError as exc:  # against the meta-schema: say where
            where = json_pointer(list(exc.instance_path)) or "/"
            raise SchemaError(f"invalid JSON Schema at {where}: {exc.message}") from exc
        except (ValueError, jsonschema_rs.ReferencingError) as exc:
            raise SchemaError(f"invalid JSON Schema: {str(exc).splitlines()[0]}") from exc

    def is_valid(self, instance: Any) -> bool:
        """True when `instance` matches."""
        return bool(self._inner.is_valid(instance))

    def violations(self, instance: Any) -> list[Violation]:
        """Every violation, each pointing at the argument it concerns."""
        if self._inner.is_valid(instance):
            return []
        try:
            errors = list(self._inner.iter_errors(instance))
        except ValueError:
            # jsonschema-rs gives back the value it refused as Python data, and cannot for one
            # nested a few hundred levels deep ("Recursion limit reached").
            message = "the arguments are nested too deeply to be checked"
            return [Violation(pointer="", keyword="depth", message=message)]
        out: list[Violation] = []
        for error in errors:
            kind = error.kind
            keyword = str(getattr(kind, "name", "") or (error.schema_path or ["?"])[-1])
            path = list(error.instance_path)
            message = str(error.message)
            if len(message) > _MAX_MESSAGE:
                message = message[: _MAX_MESSAGE - 1] + "…"
            if keyword == "required":
                out.append(
                    Violation(
                        pointer=json_pointer([*path, str(getattr(kind, "property", ""))]),
                        keyword=keyword,
                        message=message,
                    )
                )
            elif keyword in {"additionalProperties", "unevaluatedProperties"} and hasattr(
                kind, "unexpected"
            ):
                for name in kind.unexpected:
                    out.append(
                        Violation(
                            pointer=json_pointer([*path, str(name)]),
                            keyword=keyword,
                            message=f"unexpected argument {name!r}",
                        )
                    )
            else:
                out.append(Violation(pointer=json_pointer(path), keyword=keyword, message=message))
        return out


class SchemaError(ValueError):
    """A tool's schema is not valid JSON Schema (a configuration error)."""


@lru_cache(maxsize=2048)
def _compile(key: str) -> Validator:
    import json

    return Validator(json.loads(key))


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    """A compiled validator for `schema`, cached by the schema's canonical form.

    Raises:
        SchemaError: the schema itself is invalid (or is not JSON data: NaN, infinities).
    """
    try:
        text = canonical_json(schema)
    except (TypeError, ValueError, RecursionError) as exc:
        raise SchemaError(f"the schema is not JSON data: {exc}") from exc
    return _compile(text)


def resolve_ref(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """`schema`, or what its local `$ref` (`#/...`, followed up to 32 times) points to."""
    seen = 0
    while isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/") and seen < 32:
        target: Any = root
        for part in pointer_parts(schema["$ref"][1:]):
            if not isinstance(target, Mapping) or part not in target:
                return schema
            target = target[part]
        if not isinstance(target, Mapping):
            return schema
        schema = target
        seen += 1
    return schema


def _fill(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Any:
    if depth > 32 or not isinstance(value, Mapping):
        return value
    schema = resolve_ref(schema, root)
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return value
    out = dict(value)
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        if name in out:
            out[name] = _fill(out[name], sub, root, depth + 1)
        else:
            resolved = resolve_ref(sub, root)
            if "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            elif "default" in resolved:
                out[name] = copy.deepcopy(resolved["default"])
    return out


def apply_defaults(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` with every absent property that has a schema `default` filled in
    (nested objects and local `$ref`s included). Neither the input nor the schema is modified:
    each call gets its own copy of a default, so a tool that changes it changes nothing else."""
    filled = _fill(arguments, schema, schema, 0)
    return dict(filled)
