"""The vendors' strict modes as schema transformers: what a strict tool's schema may hold.

- `OpenAIStrictSchema`: OpenAI strict mode — every property required (optional ones made
  nullable; the dialect maps `null` back to "absent" when it parses calls), closed objects,
  the keyword subset strict mode accepts, within its size limits (`strict_size_problem`).
- `AnthropicStrictSchema`: Anthropic strict tool use — closed objects and the keyword subset
  its grammar takes; optional properties stay optional. No recursion.

A schema strict mode cannot express at all (a free-form object, an untyped value) raises
`NotStrict`; the dialect then exports the tool non-strict and reports that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema.losses import Action, Loss
from ..schema.walker import SchemaWalker
from .nodes import is_nullable, nullable, one_of_as_any_of, tuple_as_items, types_of

__all__ = [
    "ANTHROPIC_STRICT_FORMATS",
    "ANTHROPIC_STRICT_KEYWORDS",
    "OPENAI_STRICT_FORMATS",
    "OPENAI_STRICT_KEYWORDS",
    "AnthropicStrictSchema",
    "NotStrict",
    "OpenAIStrictSchema",
    "strict_size_problem",
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
ANTHROPIC_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "description",
        "title",
        "enum",
        "const",
        "default",
        "pattern",
        "format",
    }
)
"""Keywords Anthropic strict tool use accepts (`minItems` only 0 or 1, `enum` and `const`
only of strings, numbers, booleans and null)."""
ANTHROPIC_STRICT_FORMATS = OPENAI_STRICT_FORMATS | {"uri"}
"""String formats Anthropic strict tool use accepts."""


class NotStrict(Exception):
    """The schema is outside what a vendor's strict mode can express."""

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer or '/'}: {reason}")
        self.pointer = pointer
        self.reason = reason

    def loss(self) -> Loss:
        """The report of a tool exported non-strict for this reason (pointer relative to the
        `ToolSpec`)."""
        return Loss(
            pointer="/input_schema" + self.pointer,
            keyword="strict",
            action=Action.REWRITTEN,
            reason=f"exported with strict: false; {self.reason}",
        )


class _StrictSchema(SchemaWalker):
    """What every vendor's strict mode shares: its keyword and format subsets, `oneOf` read as
    `anyOf`, and no value that may be anything."""

    keywords: frozenset[str] = frozenset()
    """The keywords it accepts."""
    formats: frozenset[str] = frozenset()
    """The string formats it accepts."""

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        if keyword == "oneOf":
            return "anyOf" not in node
        if keyword == "format":
            return node.get("format") in self.formats
        return keyword in self.keywords

    def boolean(self, node: bool, pointer: str) -> Any:
        if node and not pointer.endswith("/additionalProperties"):
            raise NotStrict(pointer, "a value that may be anything cannot be strict")
        return node

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        one_of_as_any_of(self, node, pointer, "strict mode has no oneOf; rewritten as anyOf")
        return node


class OpenAIStrictSchema(_StrictSchema):
    """OpenAI strict mode: required everywhere, closed objects, the accepted keyword subset."""

    target = "OpenAI strict mode"
    bare_refs = True  # "$ref cannot have keywords": a described reference is inlined
    keywords = OPENAI_STRICT_KEYWORDS
    formats = OPENAI_STRICT_FORMATS

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        if keyword == "prefixItems":
            return "array" in types_of(node)  # made `items` by `transform`
        return super().allows(keyword, node)

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        node = super().transform(node, pointer)
        tuple_as_items(self, node, pointer)
        if pointer == "" and ("anyOf" in node or "$ref" in node):
            # OpenAI's rule for strict schemas: the root is a plain object with properties.
            raise NotStrict(pointer, "the root of a strict schema must be an object, not a choice")
        types = types_of(node)
        if "object" in types or "properties" in node:
            self._close(node, pointer)
        if "array" in types and "items" not in node:
            raise NotStrict(pointer, "an array without `items` cannot be strict")
        _typed(node, pointer)
        return node

    def _close(self, node: dict[str, Any], pointer: str) -> None:
        props = _closable(node, pointer)
        required = [r for r in node.get("required", ()) if isinstance(r, str)]
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


def _closable(node: dict[str, Any], pointer: str) -> Mapping[str, Any]:
    """The properties of object `node`, which strict mode may close
    (`additionalProperties: false`, as every vendor's strict mode wants).

    Raises:
        NotStrict: closing it would change what it accepts (it is open to additional
            properties, or free-form), or it requires a name it has no property for.
    """
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
    if any(isinstance(r, str) and r not in props for r in node.get("required", ())):
        raise NotStrict(pointer, "a required name without a property cannot be strict")
    return props


def _typed(node: Mapping[str, Any], pointer: str) -> None:
    if not types_of(node) and not any(
        k in node for k in ("anyOf", "allOf", "$ref", "enum", "const")
    ):
        raise NotStrict(pointer, "a value without a `type` cannot be strict")


class AnthropicStrictSchema(_StrictSchema):
    """Anthropic strict tool use: closed objects, the keyword subset it accepts (others move
    into the description), no recursion; optional properties stay optional."""

    target = "Anthropic strict mode"
    inline_refs = True  # (a recursive reference, which strict mode cannot take, is not)
    keywords = ANTHROPIC_STRICT_KEYWORDS
    formats = ANTHROPIC_STRICT_FORMATS

    def loss(self, pointer: str, keyword: str, action: Action, reason: str) -> None:
        if keyword == "$ref" and action is Action.DROPPED:  # recursive, or not resolved
            raise NotStrict(pointer, reason)
        super().loss(pointer, keyword, action, reason)

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        if keyword == "minItems":
            return node.get("minItems") in (0, 1)
        if keyword == "enum":
            values = node.get("enum")
            return isinstance(values, list) and all(_primitive(v) for v in values)
        if keyword == "const":
            return _primitive(node.get("const"))
        return super().allows(keyword, node)

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        node = super().transform(node, pointer)
        if "object" in types_of(node) or "properties" in node:
            _closable(node, pointer)
            node["additionalProperties"] = False
        _typed(node, pointer)
        return node


def _primitive(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


_STRICT_DEPTH = 10
_STRICT_PROPERTIES = 5000
_STRICT_ENUM_VALUES = 1000
_STRICT_TEXT = 120_000
_STRICT_LARGE_ENUM = (250, 15_000)


def strict_size_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a strict schema is over OpenAI's published size limits, or None: 10 levels of
    nesting, 5,000 properties, 1,000 enum values, 120,000 characters of property and
    definition names and enum and const values, and 15,000 characters for one string enum of
    more than 250 values."""
    depth = properties = values = text = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, list):
            stack.extend((item, level) for item in node)
            continue
        if not isinstance(node, Mapping):
            continue
        nests = "properties" in node or "items" in node
        depth = max(depth, level if nests else 0)
        props = node.get("properties")
        if isinstance(props, Mapping):
            properties += len(props)
            text += sum(len(str(name)) for name in props)
        defs = node.get("$defs")
        if isinstance(defs, Mapping):
            text += sum(len(str(name)) for name in defs)
        enum = node.get("enum")
        if isinstance(enum, list):
            values += len(enum)
            strings = sum(len(v) for v in enum if isinstance(v, str))
            text += strings
            if len(enum) > _STRICT_LARGE_ENUM[0] and strings > _STRICT_LARGE_ENUM[1]:
                return (
                    f"an enum of {len(enum)} values holds {strings} characters; strict mode "
                    f"takes {_STRICT_LARGE_ENUM[1]} above {_STRICT_LARGE_ENUM[0]} values"
                )
        if isinstance(node.get("const"), str):
            text += len(node["const"])
        for key, value in node.items():
            if key in ("properties", "$defs") and isinstance(value, Mapping):
                stack.extend((sub, level + 1) for sub in value.values())
            elif key in ("items", "anyOf", "prefixItems"):
                stack.append((value, level + 1 if key == "items" else level))
    limits = (
        (depth, _STRICT_DEPTH, "levels of nesting"),
        (properties, _STRICT_PROPERTIES, "properties"),
        (values, _STRICT_ENUM_VALUES, "enum values"),
        (text, _STRICT_TEXT, "characters of names and enum values"),
    )
    for measured, limit, what in limits:
        if measured > limit:
            return f"{measured} {what} are more than strict mode's {limit}"
    return None
