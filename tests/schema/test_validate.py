import pytest

from toolkeeper.schema.validate import SchemaError, apply_defaults, compile_validator, json_pointer

SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email"},
        "count": {"type": "integer", "minimum": 1, "default": 1},
        "opts": {"$ref": "#/$defs/Opts"},
        "a/b": {"type": "string"},
    },
    "required": ["to"],
    "additionalProperties": False,
    "$defs": {
        "Opts": {
            "type": "object",
            "properties": {"mode": {"enum": ["fast", "safe"], "default": "safe"}},
        }
    },
}


def test_every_violation_points_at_its_argument() -> None:
    v = compile_validator(SCHEMA)
    found = {(x.pointer, x.keyword) for x in v.violations({"count": 0, "x": 1, "a/b": 3})}
    assert found == {
        ("/to", "required"),
        ("/count", "minimum"),
        ("/x", "additionalProperties"),
        ("/a~1b", "type"),
    }


def test_formats_are_checked() -> None:
    v = compile_validator(SCHEMA)
    assert [x.keyword for x in v.violations({"to": "not-an-address"})] == ["format"]
    assert v.violations({"to": "a@example.org"}) == []


def test_validators_are_cached_per_schema() -> None:
    assert compile_validator(SCHEMA) is compile_validator(dict(SCHEMA))


def test_defaults_are_applied_through_refs() -> None:
    filled = apply_defaults(SCHEMA, {"to": "a@example.org", "opts": {}})
    assert filled == {"to": "a@example.org", "count": 1, "opts": {"mode": "safe"}}


def test_pointers_escape_slash_and_tilde() -> None:
    assert json_pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"


def test_a_date_time_may_leave_out_its_offset_as_pythons_datetime_does() -> None:
    """A function's naive `datetime` default was refused by its own schema, and so was the
    offset-less time models often write, which the function takes."""
    import datetime as dt

    from toolkeeper.schema.from_callable import function_schema

    def book(start: dt.datetime = dt.datetime(2024, 1, 1)) -> str:
        return start.isoformat()

    schema = function_schema(book).input_schema
    validator = compile_validator(schema)
    default = schema["properties"]["start"]["default"]
    for good in (default, "2024-05-01T10:00:00", "2024-05-01T10:00:00Z", "2024-05-01 10:00+02:00"):
        assert validator.is_valid({"start": good}), good
    for bad in ("2024-05-01", "10:00", "2024-05-01T25:00:00", "tomorrow"):
        assert not validator.is_valid({"start": bad}), bad


def test_an_invalid_schema_is_refused_in_one_line_naming_where() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "float"}}}}
    with pytest.raises(SchemaError) as refused:
        compile_validator(schema)
    assert str(refused.value).startswith("invalid JSON Schema at /properties/xs/items/type: ")
    assert "\n" not in str(refused.value)
