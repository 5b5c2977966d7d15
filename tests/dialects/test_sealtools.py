"""The Seal-Tools importer: Python type names, responses as output_schema, free-form keys."""

from __future__ import annotations

from toolkeeper.dialects import Action
from toolkeeper.dialects.sealtools import import_tool

DOC = {
    "id": "seal:getTemp",
    "name": "getTemp",
    "description": "Temperature of a place.",
    "parameters": {
        "properties": {
            "place": {"type": "str", "description": "Where", "example": "Oslo"},
            "depth": {"type": "float", "description": "How deep", "unit": "m"},
        },
        "required": ["place"],
    },
    "responses": {"celsius": {"type": "float", "description": "Degrees"}},
}


def test_types_map_and_responses_become_the_output_schema() -> None:
    spec = import_tool(DOC).value
    assert spec.input_schema["properties"]["place"] == {
        "type": "string",
        "description": "Where",
        "examples": ["Oslo"],
    }
    assert spec.input_schema["required"] == ["place"]
    assert spec.output_schema == {
        "type": "object",
        "properties": {"celsius": {"type": "number", "description": "Degrees"}},
    }


def test_free_form_keys_move_into_the_description() -> None:
    converted = import_tool(DOC)
    assert converted.value.input_schema["properties"]["depth"]["description"] == (
        'How deep (unit: "m")'
    )
    assert [(loss.keyword, loss.action) for loss in converted.losses] == [
        ("unit", Action.MOVED_TO_DESCRIPTION)
    ]


def test_a_required_name_written_as_text_is_required() -> None:
    """`"required": "place"` became the letters p, l, a, c, e: the parameter was optional."""
    doc = DOC | {"parameters": DOC["parameters"] | {"required": "place"}}  # type: ignore[operator]
    assert import_tool(doc).value.input_schema["required"] == ["place"]
