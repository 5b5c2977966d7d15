"""No conversion drops a keyword without saying so: every keyword the walker knows is, for every
format, either kept (or rewritten to an exact equivalent) or named in the loss report."""

from __future__ import annotations

from typing import Any

import pytest

from toolkeeper.core.values import ToolSpec
from toolkeeper.dialects import DIALECTS, get_dialect
from toolkeeper.schema.walker import KNOWN_KEYWORDS

STRING = {"type": "string"}
OBJECT = {"type": "object", "properties": {"x": STRING, "y": STRING}, "required": ["x", "y"]}
ARRAY = {"type": "array", "items": STRING}

NODES: dict[str, dict[str, Any]] = {
    "type": STRING,
    "enum": {"type": "string", "enum": ["a", "b"]},
    "const": {"type": "string", "const": "a"},
    "multipleOf": {"type": "number", "multipleOf": 2},
    "maximum": {"type": "number", "maximum": 9},
    "exclusiveMaximum": {"type": "number", "exclusiveMaximum": 9},
    "minimum": {"type": "number", "minimum": 1},
    "exclusiveMinimum": {"type": "number", "exclusiveMinimum": 1},
    "maxLength": {"type": "string", "maxLength": 9},
    "minLength": {"type": "string", "minLength": 1},
    "pattern": {"type": "string", "pattern": "^a"},
    "maxItems": {**ARRAY, "maxItems": 9},
    "minItems": {**ARRAY, "minItems": 1},
    "uniqueItems": {**ARRAY, "uniqueItems": True},
    "contains": {**ARRAY, "contains": {"const": "a"}},
    "maxContains": {**ARRAY, "contains": {"const": "a"}, "maxContains": 2},
    "minContains": {**ARRAY, "contains": {"const": "a"}, "minContains": 1},
    "maxProperties": {**OBJECT, "maxProperties": 2},
    "minProperties": {**OBJECT, "minProperties": 1},
    "required": OBJECT,
    "dependentRequired": {**OBJECT, "dependentRequired": {"x": ["y"]}},
    "title": {"type": "string", "title": "P"},
    "description": {"type": "string", "description": "a p"},
    "default": {"type": "string", "default": "a"},
    "deprecated": {"type": "string", "deprecated": True},
    "readOnly": {"type": "string", "readOnly": True},
    "writeOnly": {"type": "string", "writeOnly": True},
    "examples": {"type": "string", "examples": ["a"]},
    "format": {"type": "string", "format": "email"},
    "contentEncoding": {"type": "string", "contentEncoding": "base64"},
    "contentMediaType": {"type": "string", "contentMediaType": "application/json"},
    "contentSchema": {"type": "string", "contentSchema": {"type": "object"}},
    "$schema": {"type": "string", "$schema": "https://json-schema.org/draft/2020-12/schema"},
    "$id": {"type": "string", "$id": "https://example.com/p"},
    "$anchor": {"type": "string", "$anchor": "p"},
    "$dynamicRef": {"type": "string", "$dynamicRef": "#meta"},
    "$dynamicAnchor": {"type": "string", "$dynamicAnchor": "meta"},
    "$comment": {"type": "string", "$comment": "why"},
    "$vocabulary": {"type": "string", "$vocabulary": {"https://example.com/v": True}},
    "$ref": {"$ref": "#/$defs/S"},
    "$defs": {**OBJECT, "$defs": {"T": STRING}},
    "properties": OBJECT,
    "patternProperties": {**OBJECT, "patternProperties": {"^z": STRING}},
    "additionalProperties": {**OBJECT, "additionalProperties": STRING},
    "propertyNames": {**OBJECT, "propertyNames": {"pattern": "^[a-z]"}},
    "unevaluatedProperties": {**OBJECT, "unevaluatedProperties": False},
    "dependentSchemas": {**OBJECT, "dependentSchemas": {"x": {"required": ["y"]}}},
    "items": ARRAY,
    "prefixItems": {"type": "array", "prefixItems": [STRING], "items": False},
    "unevaluatedItems": {**ARRAY, "unevaluatedItems": False},
    "allOf": {"type": "string", "allOf": [{"minLength": 1}]},
    "anyOf": {"anyOf": [STRING, {"type": "integer"}]},
    "oneOf": {"oneOf": [STRING, {"type": "integer"}]},
    "not": {"type": "string", "not": {"const": "b"}},
    "if": {"type": "string", "if": {"minLength": 2}, "then": {"pattern": "^a"}},
    "then": {"type": "string", "if": {"minLength": 2}, "then": {"pattern": "^a"}},
    "else": {"type": "string", "if": {"minLength": 2}, "else": {"pattern": "^b"}},
}


def test_the_keyword_table_covers_every_keyword_the_walker_knows() -> None:
    assert set(NODES) == set(KNOWN_KEYWORDS)


def _exported_node(name: str, definition: dict[str, Any]) -> Any:
    params = {
        "openai_chat": lambda d: d["function"]["parameters"],
        "openai_responses": lambda d: d["parameters"],
        "anthropic": lambda d: d["input_schema"],
        "gemini": lambda d: d["parametersJsonSchema"],
        "mcp": lambda d: d["inputSchema"],
    }[name](definition)
    return params["properties"]["p"]


def _kept(keyword: str, source: dict[str, Any], node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    if keyword in node:
        return True
    if keyword == "const":
        return node.get("enum") == [source["const"]]
    if keyword == "$ref":
        return node.get("type") == "string"  # inlined
    return False


@pytest.mark.parametrize("name", list(DIALECTS))
@pytest.mark.parametrize("keyword", sorted(NODES))
def test_each_keyword_is_kept_or_reported(name: str, keyword: str) -> None:
    source = NODES[keyword]
    spec = ToolSpec(
        name="probe",
        input_schema={
            "type": "object",
            "properties": {"p": source},
            "required": ["p"],
            "$defs": {"S": STRING},
        },
    )
    exported = get_dialect(name).export_tool(spec)
    reported = {loss.keyword for loss in exported.losses if "/properties/p" in loss.pointer}
    assert _kept(keyword, source, _exported_node(name, exported.value)) or keyword in reported
