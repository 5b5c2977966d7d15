"""Each format's schema transformer: what it changes on top of `SchemaWalker`.

- `FullSchema`: Anthropic, MCP and OpenAI non-strict take JSON Schema 2020-12 as it is.
- `OpenAIStrictSchema`: OpenAI strict mode — every property required (optional ones made
  nullable; the dialect maps `null` back to "absent" when it parses calls), closed objects,
  the keyword subset strict mode accepts. A schema strict mode cannot express at all (a
  free-form object, an untyped value) raises `NotStrict`; the dialect then exports the tool
  non-strict and reports that.
- `GeminiSchema`: Gemini's `parametersJsonSchema` subset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema.losses import Action, Converted, Loss, prefixed
from ..schema.walker import SchemaWalker

__all__ = [
    "GEMINI_KEYWORDS",
    "OPENAI_STRICT_FORMATS",
    "OPENAI_STRICT_KEYWORDS",
    "FullSchema",
    "GeminiSchema",
    "NotStrict",
    "OpenAIStrictSchema",
    "full_schema",
    "is_nullable",
    "object_root",
    "types_of",
]

OPENAI_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "$ref",
        "$defs",
        "description",
        "title",
        "enum",
        "const",
        "pattern",
        "format",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "minItems",
        "maxItems",
    }
)
"""Keywords OpenAI strict mode (Structured Outputs) accepts."""
OPENAI_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""String formats OpenAI strict mode accepts."""
GEMINI_KEYWORDS = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)
"""Keywords Gemini's `parametersJsonSchema` accepts."""


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


def object_root(converted: Converted[dict[str, Any]], target: str) -> Converted[dict[str, Any]]:
    """The schema with `type: object` at its root, as every format's tool parameters need."""
    schema = dict(converted.value)
    losses = list(converted.losses)
    types = types_of(schema)
    if not types:
        schema = {"type": "object", **schema}
    elif types != ["object"]:
        losses.append(
            Loss(
                pointer="/type",
                keyword="type",
                action=Action.REWRITTEN,
                reason=f"{target} tool parameters must be an object, not {types}",
            )
        )
        schema["type"] = "object"
    return Converted(value=schema, losses=tuple(losses))


class FullSchema(SchemaWalker):
    """JSON Schema 2020-12 kept as it is (normalized: one root `$defs`)."""


def full_schema(schema: Mapping[str, Any], pointer: str, losses: list[Loss]) -> dict[str, Any]:
    """`schema` walked as full JSON Schema; its losses are appended under `pointer`."""
    converted = FullSchema(schema).walk()
    losses.extend(prefixed(pointer, converted.losses))
    return converted.value


class NotStrict(Exception):
    """The schema is outside what OpenAI strict mode can express."""

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer or '/'}: {reason}")
        self.pointer = pointer
        self.reason = reason


class OpenAIStrictSchema(SchemaWalker):
    """OpenAI strict mode: required everywhere, closed objects, the accepted keyword subset."""

    target = "OpenAI strict mode"

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        if keyword == "oneOf":
            return "anyOf" not in node
        if keyword == "format":
            return node.get("format") in OPENAI_STRICT_FORMATS
        return keyword in OPENAI_STRICT_KEYWORDS

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        _one_of_as_any_of(self, node, pointer, "strict mode has no oneOf; rewritten as anyOf")
        if pointer == "" and ("anyOf" in node or "$ref" in node):
            # OpenAI's rule for strict schemas: the root is a plain object with properties.
            raise NotStrict(pointer, "the root of a strict schema must be an object, not a choice")
        types = types_of(node)
        if "object" in types or "properties" in node:
            self._close(node, pointer)
        if "array" in types and "items" not in node:
            raise NotStrict(pointer, "an array without `items` cannot be strict")
        if not types and not any(k in node for k in ("anyOf", "$ref", "enum", "const")):
            raise NotStrict(pointer, "a value without a `type` cannot be strict")
        return node

    def _close(self, node: dict[str, Any], pointer: str) -> None:
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if extra not in (None, False):
            raise NotStrict(pointer, "an object open to additional properties cannot be strict")
        if not isinstance(props, Mapping) or not props:
            if node.get("required"):
                raise NotStrict(pointer, "required names without properties cannot be strict")
            if extra is None:
                raise NotStrict(pointer, "a free-form object cannot be strict")
            props = {}
        required = [r for r in node.get("required", ()) if isinstance(r, str)]
        if any(r not in props for r in required):
            raise NotStrict(pointer, "a required name without a property cannot be strict")
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in required:
                out[name] = sub
                continue
            if is_nullable(sub):
                self.loss(
                    f"{pointer}/properties/{name}",
                    "required",
                    Action.REWRITTEN,
                    "strict mode makes every property required; this optional property "
                    "already accepts null, so null and absent can no longer be told apart",
                )
            out[name] = nullable(sub)
        node["properties"] = out
        node["required"] = list(out)
        node["additionalProperties"] = False


class GeminiSchema(SchemaWalker):
    """Gemini's `parametersJsonSchema` subset."""

    target = "Gemini"

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        if keyword == "oneOf":
            return "anyOf" not in node
        if keyword == "const":
            return _enumerable(node["const"]) and "enum" not in node
        if keyword == "enum":
            return isinstance(node["enum"], list) and all(_enumerable(v) for v in node["enum"])
        return keyword in GEMINI_KEYWORDS

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        _one_of_as_any_of(self, node, pointer, "Gemini reads oneOf as anyOf")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        types = types_of(node)
        if len(types) == 1:
            node["type"] = types[0]
        elif len(types) > 1 and "anyOf" not in node:
            del node["type"]
            node["anyOf"] = [{"type": t} for t in types]
        return node


def _one_of_as_any_of(walker: SchemaWalker, node: dict[str, Any], pointer: str, why: str) -> None:
    """Rewrite `oneOf` (exactly one branch) as `anyOf` (at least one), reporting the loss."""
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
        walker.loss(
            pointer + "/oneOf", "oneOf", Action.REWRITTEN, f"{why} (several branches may match)"
        )


def _enumerable(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)
