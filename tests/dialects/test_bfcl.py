"""The BFCL importer: BFCL's type names and `optional` key mapped onto JSON Schema."""

from __future__ import annotations

from toolkeeper.dialects import Action, get_importer
from toolkeeper.dialects.bfcl import import_tool

DOC = {
    "name": "geo.distance",
    "description": "Distance between two points.",
    "parameters": {
        "type": "dict",
        "properties": {
            "a": {"type": "tuple", "items": {"type": "float"}},
            "data": {"type": "any"},
            "opts": {"type": "HashMap", "description": "options"},
            "ids": {"type": "ArrayList", "items": {"type": "long"}},
            "unit": {"type": "String", "optional": True, "default": "km"},
        },
        "required": ["a", "unit"],
    },
}


def test_bfcl_types_become_json_schema_types() -> None:
    spec = get_importer("bfcl").import_tool(DOC).value
    props = spec.input_schema["properties"]
    assert spec.input_schema["type"] == "object"
    assert props["a"] == {"type": "array", "items": {"type": "number"}}
    assert props["data"] == {}
    assert props["opts"] == {"type": "object", "description": "options"}
    assert props["ids"] == {"type": "array", "items": {"type": "integer"}}


def test_optional_wins_over_required_and_the_clash_is_reported() -> None:
    converted = import_tool(DOC)
    assert converted.value.input_schema["required"] == ["a"]
    assert "optional" not in converted.value.input_schema["properties"]["unit"]
    assert sorted((loss.pointer, loss.action) for loss in converted.losses) == [
        ("/parameters/properties/a/type", Action.REWRITTEN),
        ("/parameters/required", Action.REWRITTEN),
    ]


def test_a_consistent_optional_list_is_dropped_silently() -> None:
    doc = {
        "name": "f",
        "parameters": {
            "type": "dict",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "optional": [],
        },
    }
    converted = import_tool(doc)
    assert converted.lossless
    assert converted.value.input_schema == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    }


def test_a_default_its_own_parameter_refuses_is_dropped_and_reported() -> None:
    doc = {
        "name": "cell.info",
        "parameters": {
            "type": "dict",
            "properties": {
                "detailed": {"type": "boolean", "default": "false"},
                "limit": {"type": "integer", "default": None},
                "unit": {"type": "string", "default": "km"},
            },
        },
    }
    converted = import_tool(doc)
    props = converted.value.input_schema["properties"]
    assert props == {
        "detailed": {"type": "boolean"},
        "limit": {"type": "integer"},
        "unit": {"type": "string", "default": "km"},
    }
    assert [(loss.pointer, loss.action) for loss in converted.losses] == [
        ("/parameters/properties/detailed/default", Action.DROPPED),
        ("/parameters/properties/limit/default", Action.DROPPED),
    ]


def test_an_enum_on_an_array_lists_what_its_items_may_be() -> None:
    """BFCL puts the values an array's items may take in the array's `enum` (live_multiple's
    `metrics`): read as JSON Schema, no array is one of those strings, so every call, the
    gold ones with `metrics: []` among them, was refused, and the `[]` default dropped."""
    from toolkeeper.schema.validate import compile_validator

    doc = {
        "name": "get_sensor_readings_latest",
        "parameters": {
            "type": "dict",
            "properties": {
                "metrics": {
                    "type": "array",
                    "items": {"type": "string"},
                    "enum": ["temperature", "humidity", "co2"],
                    "default": [],
                },
                "tags": {"type": "array", "enum": [["a"], ["b"]]},
            },
        },
    }
    converted = import_tool(doc)
    props = converted.value.input_schema["properties"]
    assert props["metrics"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["temperature", "humidity", "co2"]},
        "default": [],
    }
    assert props["tags"] == {"type": "array", "enum": [["a"], ["b"]]}  # (arrays: as JSON Schema)
    assert [(loss.pointer, loss.action) for loss in converted.losses] == [
        ("/parameters/properties/metrics/enum", Action.REWRITTEN)
    ]
    validator = compile_validator(converted.value.input_schema)
    assert validator.is_valid({"metrics": []})
    assert validator.is_valid({"metrics": ["co2", "humidity"]})
    assert not validator.is_valid({"metrics": ["noise"]})
