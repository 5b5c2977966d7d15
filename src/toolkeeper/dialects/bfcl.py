"""Import tool docs in the Berkeley Function Calling Leaderboard's dialect.

BFCL writes parameters almost as JSON Schema, with its own type names (`dict`, `float`,
`tuple`, `any`, Java's `String`, `HashMap`, `long`, ...) and a non-standard `optional` key (a
flag on a property, or a list of names on an object). The importer maps them onto JSON Schema
2020-12; a mapping that widens or guesses (`tuple` read as an array, `char` as a string, an
unknown or empty type, an array's `enum` read as the values of its items) is reported, and so
is a `default` its own parameter refuses (BFCL's `None`, or `"false"` for a boolean), which is
dropped. `optional` may be a bool or a yes/no string. Import only: nothing is ever exported
to BFCL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.values import ToolSpec
from ..schema.losses import Action, Converted, Loss
from ..schema.validate import SchemaError, compile_validator
from ..schema.walker import SchemaWalker
from .base import Importer
from .wire import plain

__all__ = ["BFCL", "BFCL_TYPES", "import_tool"]

BFCL_TYPES: Mapping[str, str | None] = {
    "dict": "object",
    "object": "object",
    "HashMap": "object",
    "float": "number",
    "double": "number",
    "number": "number",
    "integer": "integer",
    "int": "integer",
    "long": "integer",
    "string": "string",
    "String": "string",
    "boolean": "boolean",
    "Boolean": "boolean",
    "array": "array",
    "Array": "array",
    "ArrayList": "array",
    "any": None,
}
"""BFCL type names that map onto a JSON Schema type without loss (None: any value)."""

_WIDENED: Mapping[str, tuple[str | None, str]] = {
    "tuple": ("array", "BFCL tuple read as an array: its length is not fixed"),
    "char": ("string", "Java char read as a string: its length is not limited to one"),
    "": (None, "empty BFCL type read as any value"),
}


_FLAGS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _accepts(node: Mapping[str, Any], value: Any) -> bool:
    """Whether `node`, its default aside, accepts `value` (the executor fills defaults in
    after validation: a `"false"` for a boolean would reach the tool as a true string)."""
    try:
        validator = compile_validator({k: v for k, v in node.items() if k != "default"})
    except SchemaError:
        return True  # (a broken schema is refused when the tool is checked)
    return validator.is_valid(value)


class _BFCLSchema(SchemaWalker):
    target = "BFCL import"

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        if "type" in node and isinstance(node["type"], str):
            name = node["type"]
            if name in BFCL_TYPES:
                mapped = BFCL_TYPES[name]
            elif name in _WIDENED:
                mapped, reason = _WIDENED[name]
                self.loss(pointer + "/type", "type", Action.REWRITTEN, reason)
            else:
                mapped = None
                self.loss(
                    pointer + "/type",
                    "type",
                    Action.DROPPED,
                    f"unknown BFCL type {name!r} read as any value",
                )
            if mapped is None:
                del node["type"]
            else:
                node["type"] = mapped
        self._item_enum(node, pointer)
        if isinstance(node.get("optional"), list):
            self._unrequire(node, [str(n) for n in node.pop("optional")], pointer)
        props = node.get("properties")
        if isinstance(props, Mapping):
            flagged = [
                name
                for name, sub in props.items()
                if isinstance(sub, dict)
                and str(sub.get("optional")).lower() in _FLAGS
                and _FLAGS[str(sub.pop("optional")).lower()]
            ]
            self._unrequire(node, flagged, pointer)
        if "default" in node and not _accepts(node, node["default"]):
            value = node.pop("default")
            self.loss(
                pointer + "/default",
                "default",
                Action.DROPPED,
                f"BFCL default {value!r} is not a value of this parameter; a call that leaves "
                "it out gets no value rather than this one",
            )
        for key in ("items", "additionalProperties"):
            child = node.get(key)
            if isinstance(child, dict) and "optional" in child:
                del child["optional"]
                self.loss(
                    f"{pointer}/{key}/optional",
                    "optional",
                    Action.DROPPED,
                    "BFCL `optional` means nothing outside an object's properties",
                )
        return node

    def _item_enum(self, node: dict[str, Any], pointer: str) -> None:
        """BFCL's `enum` of values on an array lists what its items may be (`metrics`: some
        of `["temperature", "co2"]`); as JSON Schema it would ask the array itself to be one
        of them, which no array is, and every call would be refused."""
        values = node.get("enum")
        items = node.get("items", {})
        if (
            node.get("type") != "array"
            or not isinstance(values, list)
            or any(isinstance(v, list) for v in values)
            or not isinstance(items, dict)
            or "enum" in items
        ):
            return
        node["items"] = {**items, "enum": node.pop("enum")}
        self.loss(
            pointer + "/enum",
            "enum",
            Action.REWRITTEN,
            "BFCL enum of an array read as the values its items may take",
        )

    def _unrequire(self, node: dict[str, Any], names: list[str], pointer: str) -> None:
        required = node.get("required")
        if not isinstance(required, list):
            return
        clash = [n for n in names if n in required]
        if clash:
            node["required"] = [n for n in required if n not in clash]
            self.loss(
                pointer + "/required",
                "required",
                Action.REWRITTEN,
                f"BFCL marks {clash} both required and optional; read as optional",
            )


class BFCL(Importer):
    """BFCL function docs (`name`, `description`, `parameters`)."""

    name = "bfcl"

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = plain(definition)
        converted = _BFCLSchema(data.get("parameters") or {"type": "dict"}).walk()
        schema = converted.value
        schema.pop("optional", None)
        losses: list[Loss] = [
            Loss(
                pointer="/parameters" + loss.pointer,
                keyword=loss.keyword,
                action=loss.action,
                reason=loss.reason,
            )
            for loss in converted.losses
        ]
        if "type" not in schema:
            schema = {"type": "object", **schema}
        metadata = {k: data[k] for k in ("id", "source_category", "language") if k in data}
        spec = ToolSpec(
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            input_schema=schema,
            source=self.name,
            metadata=metadata,
        )
        return Converted(value=spec, losses=tuple(losses)).check(strict)


def import_tool(
    definition: Mapping[str, Any] | Any, *, strict: bool = False
) -> Converted[ToolSpec]:
    """`BFCL().import_tool`: one BFCL doc as a ToolSpec, with the loss report.

    Raises:
        LossError: `strict` is true and the conversion lost something.
    """
    return BFCL().import_tool(definition, strict=strict)
