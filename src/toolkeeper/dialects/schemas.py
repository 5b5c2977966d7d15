"""Each format's schema transformer: what it changes on top of `SchemaWalker`.

- `FullSchema`: Anthropic and MCP take JSON Schema 2020-12 as it is.
- `OpenAISchema`: OpenAI non-strict — as it is, but every array has `items` (OpenAI refuses an
  array without it: a tuple's `prefixItems` become `items` any of its types may fill).
- `OpenAIStrictSchema`, `AnthropicStrictSchema`: the vendors' strict modes (`dialects.strict`).
- `GeminiSchema`: Gemini's `parametersJsonSchema` subset.

The helpers they share are importable from here too: one node read or rewritten
(`dialects.nodes`) and the root of a tool's parameters (`dialects.roots`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema.losses import Loss, prefixed
from ..schema.walker import SchemaWalker
from .nodes import is_nullable, one_of_as_any_of, tuple_as_items, types_of
from .roots import merged_root, object_root
from .strict import (
    ANTHROPIC_STRICT_FORMATS,
    ANTHROPIC_STRICT_KEYWORDS,
    OPENAI_STRICT_FORMATS,
    OPENAI_STRICT_KEYWORDS,
    AnthropicStrictSchema,
    NotStrict,
    OpenAIStrictSchema,
    strict_size_problem,
)

__all__ = [
    "ANTHROPIC_STRICT_FORMATS",
    "ANTHROPIC_STRICT_KEYWORDS",
    "GEMINI_KEYWORDS",
    "OPENAI_STRICT_FORMATS",
    "OPENAI_STRICT_KEYWORDS",
    "AnthropicStrictSchema",
    "FullSchema",
    "GeminiSchema",
    "NotStrict",
    "OpenAISchema",
    "OpenAIStrictSchema",
    "full_schema",
    "is_nullable",
    "merged_root",
    "object_root",
    "strict_size_problem",
    "types_of",
]

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


class FullSchema(SchemaWalker):
    """JSON Schema 2020-12 kept as it is (normalized: one root `$defs`)."""


class OpenAISchema(FullSchema):
    """OpenAI non-strict: JSON Schema as it is, but every array with `items`."""

    target = "OpenAI"

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        if "array" in types_of(node):
            tuple_as_items(self, node, pointer)
            node.setdefault("items", {})
        return node


def full_schema(schema: Mapping[str, Any], pointer: str, losses: list[Loss]) -> dict[str, Any]:
    """`schema` walked as full JSON Schema; its losses are appended under `pointer`."""
    converted = FullSchema(schema).walk()
    losses.extend(prefixed(pointer, converted.losses))
    return converted.value


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
        one_of_as_any_of(self, node, pointer, "Gemini reads oneOf as anyOf")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        types = types_of(node)
        if len(types) == 1:
            node["type"] = types[0]
        elif len(types) > 1 and "anyOf" not in node:
            del node["type"]
            node["anyOf"] = [{"type": t} for t in types]
        return node


def _enumerable(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)
