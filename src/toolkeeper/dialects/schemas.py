"""Each format's schema transformer: what it changes on top of `SchemaWalker`.

- `FullSchema`: Anthropic and MCP take JSON Schema 2020-12 as it is.
- `OpenAISchema`: OpenAI non-strict — as it is, but every array has `items` (OpenAI refuses an
  array without it: a tuple's `prefixItems` become `items` any of its types may fill).
- `OpenAIStrictSchema`: OpenAI strict mode — every property required (optional ones made
  nullable; the dialect maps `null` back to "absent" when it parses calls), closed objects,
  the keyword subset strict mode accepts. A schema strict mode cannot express at all (a
  free-form object, an untyped value) raises `NotStrict`; the dialect then exports the tool
  non-strict and reports that.
- `AnthropicStrictSchema`: Anthropic strict tool use — closed objects and the keyword subset
  its grammar takes; optional properties stay optional. No recursion. `NotStrict` as above.
- `GeminiSchema`: Gemini's `parametersJsonSchema` subset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema.losses import Action, Converted, Loss, prefixed
from ..schema.walker import SchemaWalker, deref

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


_ROOT_CHOICES = ("allOf", "anyOf", "oneOf")


def merged_root(schema: Mapping[str, Any], target: str) -> tuple[Mapping[str, Any], list[Loss]]:
    """`schema` without a choice (`anyOf`/`oneOf`/`allOf`) at its root, which neither OpenAI
    nor Anthropic take in tool parameters: the alternatives become one object with the
    properties of all of them, required where every alternative (or, for `allOf`, any part)
    requires them. The executor still checks each call against the whole schema.
    """
    if not isinstance(schema, Mapping) or not any(
        isinstance(schema.get(k), list) for k in _ROOT_CHOICES
    ):
        return schema, []
    out = {k: v for k, v in schema.items() if k not in _ROOT_CHOICES}
    own = out.get("properties")
    props: dict[str, Any] = dict(own) if isinstance(own, Mapping) else {}
    required = [r for r in out.get("required", ()) if isinstance(r, str)]
    losses: list[Loss] = []
    joined: dict[str, str] = {}  # a property made here of several: by which keyword
    for keyword in _ROOT_CHOICES:
        branches = schema.get(keyword)
        if not isinstance(branches, list):
            continue
        # A property several parts give: all of them hold (allOf), or any of them (else).
        join = "allOf" if keyword == "allOf" else "anyOf"
        shapes = [_object_shape(schema, branch) for branch in branches]
        for shape in shapes:
            for name, sub in (shape or ({}, []))[0].items():
                if name not in props:
                    props[name] = sub
                elif props[name] != sub:
                    made = _joined(props[name], sub, join, joined.get(name) == join)
                    props[name] = made
                    if isinstance(made, dict) and set(made) == {join}:
                        joined[name] = join
                    else:
                        joined.pop(name, None)
        needed = [set(shape[1]) if shape is not None else set() for shape in shapes]
        if keyword == "allOf":
            required += [n for n in sorted(set().union(*needed)) if n not in required]
        elif needed:
            required += [n for n in sorted(set.intersection(*needed)) if n not in required]
        what = "parts" if keyword == "allOf" else "alternatives"
        losses.append(
            Loss(
                pointer=f"/{keyword}",
                keyword=keyword,
                action=Action.REWRITTEN,
                reason=f"{target} takes no {keyword} at the root of tool parameters: its "
                f"{len(branches)} {what} are merged into one object (each call is still checked "
                "against the whole schema)",
            )
        )
    out["type"] = "object"
    out["properties"] = props
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    return out, losses


_READ_TOGETHER = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "prefixItems",
        "items",
        "unevaluatedItems",
        "contains",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "$ref",
    }
)
"""Keywords read against their siblings: two schemas holding them are not merged as one."""


def _joined(known: Any, sub: Any, join: str, ours: bool) -> Any:
    """One schema for a property that two parts of a root choice give: `join` (allOf or
    anyOf) of both, whole (a schema's own anyOf and its description stay as they are); for
    allOf, one merged object when the two constrain different keywords."""
    if ours:
        return {join: [*known[join], *([sub] if sub not in known[join] else [])]}
    if (
        join == "allOf"
        and isinstance(known, Mapping)
        and isinstance(sub, Mapping)
        and not (_READ_TOGETHER & (set(known) | set(sub)))
        and all(known[k] == sub[k] for k in set(known) & set(sub))
    ):
        return {**known, **sub}
    return {join: [known, sub]}


def _object_shape(root: Mapping[str, Any], branch: Any) -> tuple[dict[str, Any], list[str]] | None:
    """The properties and required names of an object alternative (a local `$ref` followed)."""
    branch = deref(branch, root)
    if not isinstance(branch, Mapping):
        return None
    props = branch.get("properties")
    if not isinstance(props, Mapping) and types_of(branch) not in ([], ["object"]):
        return None
    required = [r for r in branch.get("required", ()) if isinstance(r, str)]
    return (dict(props) if isinstance(props, Mapping) else {}), required


class FullSchema(SchemaWalker):
    """JSON Schema 2020-12 kept as it is (normalized: one root `$defs`)."""


def _tuple_as_items(walker: SchemaWalker, node: dict[str, Any], pointer: str) -> None:
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


class OpenAISchema(FullSchema):
    """OpenAI non-strict: JSON Schema as it is, but every array with `items`."""

    target = "OpenAI"

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        if "array" in types_of(node):
            _tuple_as_items(self, node, pointer)
            node.setdefault("items", {})
        return node


def full_schema(schema: Mapping[str, Any], pointer: str, losses: list[Loss]) -> dict[str, Any]:
    """`schema` walked as full JSON Schema; its losses are appended under `pointer`."""
    converted = FullSchema(schema).walk()
    losses.extend(prefixed(pointer, converted.losses))
    return converted.value


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
        _one_of_as_any_of(self, node, pointer, "strict mode has no oneOf; rewritten as anyOf")
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
        _tuple_as_items(self, node, pointer)
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
