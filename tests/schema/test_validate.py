from toolkeeper.schema.validate import apply_defaults, compile_validator, json_pointer

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
