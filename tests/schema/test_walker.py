"""The schema walker: references, recursion, normalization and the loss report."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from toolkeeper.schema.losses import Action
from toolkeeper.schema.walker import SchemaWalker, resolve_pointer

RECURSIVE = {
    "type": "object",
    "properties": {"root": {"$ref": "#/definitions/Node"}},
    "definitions": {
        "Node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}},
        }
    },
}


class Inlining(SchemaWalker):
    inline_refs = True


class NoPatterns(SchemaWalker):
    target = "a test format"

    def allows(self, keyword: str, node: Mapping[str, Any]) -> bool:
        return keyword not in ("pattern", "$comment")


def test_kept_references_point_into_one_root_defs() -> None:
    out = SchemaWalker(RECURSIVE).walk()
    assert out.lossless
    assert out.value["properties"]["root"] == {"$ref": "#/$defs/Node"}
    node = out.value["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert "definitions" not in out.value


def test_inlining_a_recursive_reference_is_reported_not_looped() -> None:
    out = Inlining(RECURSIVE).walk()
    children = out.value["properties"]["root"]["properties"]["children"]
    assert children["items"] == {}
    assert [(loss.keyword, loss.action) for loss in out.losses] == [("$ref", Action.DROPPED)]
    assert out.losses[0].pointer == "/properties/root/properties/children/items"
    assert "$defs" not in out.value


def test_inlining_a_plain_reference_loses_nothing() -> None:
    schema = {"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}}
    out = Inlining(schema).walk()
    assert out.lossless
    assert out.value == {"properties": {"a": {"type": "string"}}}


def test_a_reference_that_cannot_be_resolved_is_reported() -> None:
    out = SchemaWalker({"properties": {"a": {"$ref": "https://example.com/a.json"}}}).walk()
    assert out.value["properties"]["a"] == {}
    assert out.losses[0].keyword == "$ref"
    assert out.losses[0].action is Action.DROPPED


def test_unsupported_constraints_move_into_the_description() -> None:
    schema = {"type": "string", "description": "A code.", "pattern": "^[A-Z]+$"}
    out = NoPatterns(schema).walk()
    assert out.value == {"type": "string", "description": 'A code. (pattern: "^[A-Z]+$")'}
    assert out.losses[0].action is Action.MOVED_TO_DESCRIPTION
    assert out.losses[0].pointer == "/pattern"


def test_unsupported_structure_is_dropped_and_reported() -> None:
    out = NoPatterns({"type": "string", "$comment": "internal"}).walk()
    assert out.value == {"type": "string"}
    assert out.losses[0].action is Action.DROPPED


def test_array_form_items_become_prefix_items() -> None:
    schema = {"type": "array", "items": [{"type": "string"}], "additionalItems": False}
    out = SchemaWalker(schema).walk()
    assert out.value == {"type": "array", "prefixItems": [{"type": "string"}], "items": False}


def test_the_input_schema_is_never_modified() -> None:
    schema = copy.deepcopy(RECURSIVE)
    Inlining(schema).walk()
    NoPatterns(schema).walk()
    assert schema == RECURSIVE


def test_resolve_pointer_unescapes_and_misses_cleanly() -> None:
    root = {"$defs": {"a/b": {"type": "string"}}, "list": [1, 2]}
    assert resolve_pointer(root, "#/$defs/a~1b") == {"type": "string"}
    assert resolve_pointer(root, "#/list/1") == 2
    assert resolve_pointer(root, "#/nope") is None
    assert resolve_pointer(root, "other.json#/x") is None


def test_an_older_drafts_tuple_is_checked_as_one_after_normalization() -> None:
    from toolkeeper.schema.validate import compile_validator

    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"point": {"$ref": "#/definitions/Point"}},
        "definitions": {"Point": {"type": "array", "items": [{"type": "number"}] * 2}},
    }
    validator = compile_validator(SchemaWalker(schema).walk().value)
    assert validator.is_valid({"point": [1, 2]})
    assert not validator.is_valid({"point": ["a", "b"]})
