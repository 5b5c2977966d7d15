"""The one JSON Schema walker every dialect's schema transformer builds on.

`SchemaWalker` visits a schema once, depth first: it resolves local `$ref`s (inlining them or
keeping them in one root `$defs`), detects recursion, normalizes older spellings that mean the
same (`definitions` → `$defs`, array-form `items` → `prefixItems`, and then an older draft's
`$schema` → 2020-12), and asks two hooks what to do: `allows(keyword)` per keyword (a
keyword a target cannot carry is moved into the description or dropped, and reported), and
`transform(node)` per node for rewrites a target needs (OpenAI strict mode, Gemini's
subset). A format says only what it changes; everything else — pointers, recursion, the loss
report — lives here. (Pattern: pydantic-ai `_json_schema.py::JsonSchemaTransformer`.)

This module is pure: no I/O, and the input schema is never modified.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .losses import Action, Converted, Loss
from .validate import json_pointer

__all__ = [
    "ANNOTATION_KEYWORDS",
    "CORE_KEYWORDS",
    "KNOWN_KEYWORDS",
    "SCHEMA_LIST_KEYWORDS",
    "SCHEMA_MAP_KEYWORDS",
    "SCHEMA_VALUE_KEYWORDS",
    "VALIDATION_KEYWORDS",
    "SchemaWalker",
    "deref",
    "resolve_pointer",
]

SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
"""Keywords whose value maps names to subschemas."""
SCHEMA_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas."""
SCHEMA_VALUE_KEYWORDS = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
"""Keywords whose value is one subschema."""
VALIDATION_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
    }
)
"""Keywords that constrain the instance without holding subschemas."""
ANNOTATION_KEYWORDS = frozenset(
    {
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "format",
        "contentEncoding",
        "contentMediaType",
    }
)
"""Keywords that describe the instance (`format` asserts when formats are validated)."""
CORE_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "$ref",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$comment",
        "$vocabulary",
    }
)
"""Identifiers, references and comments."""
KNOWN_KEYWORDS = (
    SCHEMA_MAP_KEYWORDS
    | SCHEMA_LIST_KEYWORDS
    | SCHEMA_VALUE_KEYWORDS
    | VALIDATION_KEYWORDS
    | ANNOTATION_KEYWORDS
    | CORE_KEYWORDS
)
"""Every JSON Schema 2020-12 keyword the walker knows (after normalization)."""

_DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

_DESCRIBABLE = (VALIDATION_KEYWORDS | ANNOTATION_KEYWORDS) - {"description", "title", "type"}
_MAX_DEPTH = 64


def resolve_pointer(root: Any, ref: str) -> Any:
    """The value a local reference (`#/...`) names inside `root`, or None if there is none."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    target: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def deref(node: Any, root: Any) -> Any:
    """The schema `node` stands for: its local `$ref`s followed (a chain of at most 8)."""
    for _ in range(8):
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str):
            break
        node = resolve_pointer(root, ref)
    return node


def _esc(name: str) -> str:
    return json_pointer([name])


class SchemaWalker:
    """Walks a JSON Schema and rebuilds it for a target, recording every loss.

    Subclasses override `allows`, `transform` and the class attributes; `walk()` runs it.

    Attributes:
        inline_refs: inline every `$ref` (recursive ones become `{}` and are reported) instead
            of keeping them pointed at one root `$defs`.
        bare_refs: a kept `$ref` may have no other keyword beside it (OpenAI strict mode): a
            reference with a description is inlined, with the description; a recursive one,
            which cannot be, loses its siblings (reported).
        target: the target's name, used in loss reasons.
    """

    inline_refs: bool = False
    bare_refs: bool = False
    target: str = "JSON Schema 2020-12"

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.root = schema
        self.losses: list[Loss] = []
        self._defs: dict[str, Any] = {}
        self._def_pointers: dict[str, str] = {}
        self._used_defs: list[str] = []
        self._tuples = False
        self._collect_defs()

    # --- hooks -----------------------------------------------------------------------------

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        """Whether the target carries `keyword` of `node` as it is. Default: every keyword."""
        return True

    def transform(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        """Rewrite one node after its children were walked; report losses with `loss()`."""
        return node

    def boolean(self, node: bool, pointer: str) -> Any:
        """A boolean subschema (`true`: anything, `false`: nothing). Default: kept."""
        return node

    # --- helpers for subclasses -------------------------------------------------------------

    def loss(self, pointer: str, keyword: str, action: Action, reason: str) -> None:
        """Record one loss."""
        self.losses.append(Loss(pointer=pointer, keyword=keyword, action=action, reason=reason))

    def unsupported(self, node: dict[str, Any], keyword: str, value: Any, pointer: str) -> None:
        """Move `keyword` into `node`'s description when it is a plain constraint, else drop it."""
        reason = f"{self.target} does not support {keyword!r}"
        if keyword in _DESCRIBABLE or keyword not in KNOWN_KEYWORDS:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
            note = f"{keyword}: {text}"
            current = node.get("description")
            node["description"] = f"{current} ({note})" if current else f"({note})"
            self.loss(pointer, keyword, Action.MOVED_TO_DESCRIPTION, reason)
        else:
            self.loss(pointer, keyword, Action.DROPPED, reason)

    # --- the walk ---------------------------------------------------------------------------

    def walk(self) -> Converted[dict[str, Any]]:
        """The rebuilt schema and the losses, in the order they happened."""
        self.losses = []
        self._used_defs = []
        self._tuples = False
        out = self._node(self.root, "", (), 0)
        if not isinstance(out, dict):
            out = {} if out is True else {"not": {}}
        if not self.inline_refs and self._used_defs:
            defs: dict[str, Any] = {}
            pending = list(self._used_defs)
            done: set[str] = set()
            while pending:
                name = pending.pop(0)
                if name in done:
                    continue
                done.add(name)
                defs[name] = self._node(self._defs[name], self._def_pointers[name], (name,), 1)
                pending.extend(n for n in self._used_defs if n not in done)
            out["$defs"] = defs
        if self._tuples and out.get("$schema") not in (None, _DRAFT_2020_12):
            # An older draft's tuple (`items: [...]`) is now `prefixItems`, which a validator
            # reading the schema as that draft ignores: any item would pass.
            out["$schema"] = _DRAFT_2020_12
        return Converted(value=out, losses=tuple(self.losses))

    def _collect_defs(self) -> None:
        if not isinstance(self.root, Mapping):
            return
        for key in ("definitions", "$defs"):
            block = self.root.get(key)
            if isinstance(block, Mapping):
                for name, sub in block.items():
                    self._defs[name] = sub
                    self._def_pointers[name] = f"/{key}{_esc(name)}"

    def _def_name(self, ref: str) -> str | None:
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
                return name if name in self._defs else None
        return None

    def _kept_ref(self, ref: Any) -> str | None:
        """The rewritten `$ref` when it stays a reference, None when it must be inlined."""
        if self.inline_refs or not isinstance(ref, str):
            return None
        if ref == "#":
            return ref
        name = self._def_name(ref)
        if name is None:
            return None
        if name not in self._used_defs:
            self._used_defs.append(name)
        return f"#/$defs/{_esc(name)[1:]}"

    def _inline(
        self, node: Mapping[str, Any], pointer: str, stack: tuple[str, ...], depth: int
    ) -> Any:
        ref = node["$ref"]
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        name = self._def_name(ref) if isinstance(ref, str) else None
        key = name or str(ref)
        target = self._defs.get(name) if name is not None else None
        if target is None and isinstance(ref, str):
            target = resolve_pointer(self.root, ref)
        if not isinstance(target, Mapping | bool):
            reason = f"reference {ref!r} cannot be resolved locally"
        elif key in stack:
            reason = f"recursive reference {ref!r} cannot be inlined for {self.target}"
        else:
            reason = ""
        if reason or isinstance(target, bool):
            if reason:
                self.loss(pointer, "$ref", Action.DROPPED, reason)
            elif target is False:
                siblings["not"] = {}
            return self._node(siblings, pointer, stack, depth)
        assert isinstance(target, Mapping)
        for keyword in sorted(set(target) & set(siblings)):
            if target[keyword] != siblings[keyword] and keyword not in {"description", "title"}:
                self.loss(
                    pointer,
                    keyword,
                    Action.REWRITTEN,
                    "the referenced schema and its siblings both set it; the sibling wins",
                )
        return self._node({**target, **siblings}, pointer, (*stack, key), depth + 1)

    def _node(self, node: Any, pointer: str, stack: tuple[str, ...], depth: int) -> Any:
        if isinstance(node, bool):
            return self.boolean(node, pointer)
        if not isinstance(node, Mapping):
            self.loss(pointer, "", Action.DROPPED, "not a schema (neither an object nor a bool)")
            return {}
        if depth > _MAX_DEPTH:
            self.loss(pointer, "", Action.DROPPED, "schema nested too deeply")
            return {}
        if "$ref" in node:
            ref = node["$ref"]
            alone = not self.bare_refs or len(node) == 1
            if not alone and isinstance(ref, str) and self._def_name(ref) not in (None, *stack):
                return self._inline(node, pointer, stack, depth)  # (its siblings with it)
            kept = self._kept_ref(ref)
            if kept is None:
                return self._inline(node, pointer, stack, depth)
            if not alone:
                for keyword in sorted(k for k in node if k != "$ref"):
                    self.loss(
                        pointer + _esc(keyword),
                        keyword,
                        Action.DROPPED,
                        f"{self.target} takes no keyword beside a $ref, and this recursive "
                        "reference cannot be inlined",
                    )
                node = {"$ref": ref}
            node = {**node, "$ref": kept}
        out: dict[str, Any] = {}
        moved: list[tuple[str, Any]] = []
        for keyword, value in node.items():
            if keyword in ("definitions", "$defs") and pointer == "":
                continue  # re-emitted once at the root (or inlined)
            if keyword == "items" and isinstance(value, list):
                keyword = "prefixItems"
                self._tuples = True
                if isinstance(node.get("additionalItems"), Mapping | bool):
                    out["items"] = self._node(
                        node["additionalItems"], pointer + "/additionalItems", stack, depth + 1
                    )
            elif keyword == "additionalItems":
                continue
            if not self.allows(keyword, node):
                moved.append((keyword, value))
                continue
            out[keyword] = self._child(keyword, value, pointer, stack, depth)
        for keyword, value in moved:
            self.unsupported(out, keyword, value, pointer + _esc(keyword))
        return self.transform(out, pointer)

    def _child(
        self, keyword: str, value: Any, pointer: str, stack: tuple[str, ...], depth: int
    ) -> Any:
        here = pointer + _esc(keyword)
        if keyword in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            return {
                name: self._node(sub, here + _esc(name), stack, depth + 1)
                for name, sub in value.items()
            }
        if keyword in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            return [self._node(sub, f"{here}/{i}", stack, depth + 1) for i, sub in enumerate(value)]
        if keyword in SCHEMA_VALUE_KEYWORDS and isinstance(value, Mapping | bool):
            return self._node(value, here, stack, depth + 1)
        return value
