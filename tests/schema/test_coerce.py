"""Opt-in coercion: near-misses made to fit their schema, each change recorded."""

from __future__ import annotations

from toolkeeper.schema.coerce import coerce
from toolkeeper.schema.validate import compile_validator

SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "name": {"type": "string"},
        "note": {"type": "string"},
        "maybe": {"type": ["string", "null"]},
        "items": {"type": "array", "items": {"$ref": "#/$defs/N"}},
    },
    "required": ["count"],
    "$defs": {"N": {"type": "number"}},
}


def test_numeric_strings_become_numbers_and_are_recorded() -> None:
    out = coerce(SCHEMA, {"count": "3", "ratio": "0.5", "items": ["1.5", 2]})
    assert out.value == {"count": 3, "ratio": 0.5, "items": [1.5, 2]}
    assert [(c.pointer, c.rule) for c in out.coercions] == [
        ("/count", "numeric_string"),
        ("/ratio", "numeric_string"),
        ("/items/0", "numeric_string"),
    ]
    assert compile_validator(SCHEMA).violations(out.value) == []


def test_integral_floats_and_boolean_strings_are_coerced() -> None:
    out = coerce(SCHEMA, {"count": 2.0, "flag": "TRUE"})
    assert out.value == {"count": 2, "flag": True}
    assert {c.rule for c in out.coercions} == {"integral_float", "boolean_string"}


def test_null_for_an_optional_argument_is_removed() -> None:
    out = coerce(SCHEMA, {"count": 1, "note": None, "maybe": None})
    assert out.value == {"count": 1, "maybe": None}
    assert [(c.pointer, c.rule) for c in out.coercions] == [("/note", "null_for_optional")]


def test_nothing_is_guessed_or_touched_when_it_already_fits() -> None:
    arguments = {"count": "three", "ratio": 1, "name": "12", "count2": "4"}
    out = coerce(SCHEMA, arguments)
    assert out.value == arguments
    assert out.coercions == ()
    assert compile_validator(SCHEMA).violations(out.value)[0].pointer == "/count"


def test_a_non_integral_number_is_not_made_an_integer() -> None:
    out = coerce(SCHEMA, {"count": "2.5"})
    assert out.value == {"count": "2.5"}
    assert out.coercions == ()
