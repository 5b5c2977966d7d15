"""The root of a tool's parameter schema as every format needs it: an object
(`object_root`), without a choice of alternatives (`merged_root`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema.losses import Action, Converted, Loss
from ..schema.walker import deref
from .nodes import types_of

__all__ = ["merged_root", "object_root"]


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
