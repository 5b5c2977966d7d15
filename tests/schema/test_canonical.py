import enum
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkeeper.schema.canonical import _encode, canonical_json, digest, json_safe, parse_canonical


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ({"n": 1.0}, '{"n":1}'),
        ({"n": 1e30}, '{"n":1e+30}'),
        ({"n": 1e-7}, '{"n":1e-7}'),
        ({"n": 0.1}, '{"n":0.1}'),
        ({"n": -0.0}, '{"n":0}'),
        ({"s": 'é\n"x"'}, '{"s":"é\\n\\"x\\""}'),
        ([True, False, None], "[true,false,null]"),
        ({"\u20ac": 1, "\U0001f600": 2, "a": 3}, '{"a":3,"€":1,"😀":2}'),
    ],
)
def test_canonical_form_follows_rfc_8785(value: object, text: str) -> None:
    assert canonical_json(value) == text


# RFC 8785 Appendix B, and values where Python's repr differs from ECMAScript's form (checked
# against the `rfc8785` reference implementation).
@pytest.mark.parametrize(
    ("bits", "text"),
    [
        ("0000000000000001", "5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("41b3de4355555553", "333333333.3333332"),
        ("c3b0000000000000", "-1152921504606847000"),
    ],
)
def test_floats_are_written_as_ecmascript_writes_them(bits: str, text: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical_json(value) == text
    assert canonical_json([1e-5, 1.5e-6]) == "[0.00001,0.0000015]"


def test_keys_must_be_strings_and_int_enums_are_numbers() -> None:
    """`{1: 5}` and `{"1": 5}` are different Python values: they must not share a digest."""
    with pytest.raises(TypeError, match="keys must be strings"):
        canonical_json({1: 5, "1": 6})

    class Level(enum.IntEnum):
        LOW = 1

    assert canonical_json({"p": Level.LOW}) == '{"p":1}'


def test_equal_meaning_gives_equal_digests() -> None:
    assert digest({"a": 1, "b": [1.0, 2]}) == digest({"b": [1, 2.0], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})


def test_values_without_a_json_form_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        canonical_json(float("nan"))
    with pytest.raises(TypeError):
        canonical_json({"a": object()})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_the_fast_path_writes_what_the_full_encoder_writes(value: object) -> None:
    out: list[str] = []
    _encode(value, out)
    assert canonical_json(value) == "".join(out)
    assert _same(json.loads(canonical_json(value)), value)


def _same(read: object, value: object) -> bool:
    """Equal as JSON numbers are (doubles): a float may read back as the int it prints as."""
    if isinstance(value, float):
        return isinstance(read, int | float) and float(read) == value
    if isinstance(value, dict):
        return (
            isinstance(read, dict)
            and read.keys() == value.keys()
            and all(_same(read[k], v) for k, v in value.items())
        )
    if isinstance(value, list):
        return (
            isinstance(read, list)
            and len(read) == len(value)
            and all(_same(r, v) for r, v in zip(read, value, strict=True))
        )
    return read == value


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    # every plane: ASCII, the rest of the BMP (U+E000..U+FFFF sorts after astral keys in
    # UTF-16 order) and astral characters
    | st.text(st.characters(codec="utf-8")),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_json_values, st.booleans())
def test_the_fast_parse_digests_exactly_what_the_general_path_does(
    value: object, escape: bool
) -> None:
    text = json.dumps(value, ensure_ascii=escape)
    fast = parse_canonical(text)
    if fast is not None:
        parsed, fast_digest = fast
        assert parsed == json.loads(text)
        assert fast_digest == digest(json.loads(text))


@pytest.mark.parametrize(
    "text",
    ['{"a": 1.5}', '{"a": 1e3}', '{"\\ud83d\\ude00": 1, "\\uffff": 2}', '{"a": "\\ud800"}', "{"],
)
def test_the_fast_parse_leaves_what_it_cannot_do_exactly_to_the_general_path(text: str) -> None:
    assert parse_canonical(text) is None


def test_the_fast_parse_takes_escaped_and_raw_text_as_one_value() -> None:
    escaped = parse_canonical('{"b": 1, "a": "\\u00e9"}')
    raw = parse_canonical('{"a":"é","b":1}')
    assert escaped is not None and raw is not None and escaped == raw
    assert raw[1] == digest({"a": "é", "b": 1})


def test_json_safe_replaces_lone_surrogates_and_keeps_clean_data_as_it_is() -> None:
    clean = {"a": [1, "é", {"b": None}], "c": (2.5, True)}
    assert json_safe(clean) is clean
    assert json_safe({"k\udc00": ["\ud800x", ("\udfff",)]}) == {"k\ufffd": ["\ufffdx", ("\ufffd",)]}
    assert json_safe("\ud83d\ude00") == "\U0001f600"  # a pair is one character
