import enum
import hashlib
import hmac
import json
import math
import struct
from types import SimpleNamespace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from toolkeeper.core.values import Principal, ToolCall
from toolkeeper.executor.arguments import parse_arguments
from toolkeeper.executor.state import CallState
from toolkeeper.schema.canonical import (
    _encode,
    canonical_json,
    digest,
    digest_bytes,
    json_safe,
    parse_canonical,
    safe_text,
)

ALICE = Principal(id="alice")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ({"n": 1.0}, '{"n":1.0}'),
        ({"n": 1}, '{"n":1}'),
        ({"n": 1e30}, '{"n":1e+30}'),
        ({"n": 1e-7}, '{"n":1e-7}'),
        ({"n": 0.1}, '{"n":0.1}'),
        ({"n": -0.0}, '{"n":-0.0}'),
        ({"n": 0.0}, '{"n":0.0}'),
        ({"s": 'é\n"x"'}, '{"s":"é\\n\\"x\\""}'),
        ([True, False, None], "[true,false,null]"),
        ({"\u20ac": 1, "\U0001f600": 2, "a": 3}, '{"a":3,"€":1,"😀":2}'),
    ],
)
def test_canonical_form_follows_rfc_8785_keeping_the_type_of_numbers(
    value: object, text: str
) -> None:
    assert canonical_json(value) == text


# RFC 8785 Appendix B, and values where Python's repr differs from ECMAScript's form (checked
# against the `rfc8785` reference implementation), with `.0` where that form looks like an int.
@pytest.mark.parametrize(
    ("bits", "text"),
    [
        ("0000000000000001", "5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992.0"),
        ("4430000000000000", "295147905179352830000.0"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("41b3de4355555553", "333333333.3333332"),
        ("c3b0000000000000", "-1152921504606847000.0"),
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


def test_equal_values_give_equal_digests_and_an_int_is_not_a_float() -> None:
    assert digest({"a": 1, "b": [1.0, 2]}) == digest({"b": [1.0, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert digest({"a": 1}) != digest({"a": 1.0})
    assert digest({"a": 0.0}) != digest({"a": -0.0})


def test_a_big_int_and_the_float_nearest_it_never_share_a_digest() -> None:
    # ECMAScript writes the double 41778229342798592 as 41778229342798590.
    values = [41778229342798590, 41778229342798592, 4.177822934279859e16, 2**68, float(2**68)]
    assert len({canonical_json(v) for v in values}) == len(values)
    assert len({digest({"count": v}) for v in values}) == len(values)


def test_a_keyed_digest_is_an_hmac_of_the_canonical_form() -> None:
    key = b"k" * 32
    text = canonical_json({"pin": "1234"}).encode()
    assert digest({"pin": "1234"}, key) == hmac.new(key, text, hashlib.sha256).hexdigest()
    assert digest({"pin": "1234"}, key) != digest({"pin": "1234"})
    assert digest({"pin": "1234"}, key) != digest({"pin": "1234"}, b"j" * 32)
    fast = parse_canonical('{"pin": "1234"}', key)
    assert fast is not None and fast[1] == digest({"pin": "1234"}, key)


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
    """The same value, type for type: an int is no float, -0.0 is not 0.0."""
    if type(read) is not type(value):
        return False
    if isinstance(value, float):
        return struct.pack(">d", read) == struct.pack(">d", value)
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


# -- injectivity: values that differ as a tool receives them never share a digest -----------

KEY = b"0123456789abcdef0123456789abcdef"

_numbers = (
    st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.integers(min_value=2**53 - 2, max_value=10**22)  # where doubles are sparser than ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(2**80), max_value=2**80).map(float)  # integral floats
    | st.floats(min_value=-1e-300, max_value=1e-300)
    | st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1.7976931348623157e308, 1e21, 1e-7])
)
_strings = st.text() | st.text(st.characters(codec="utf-8")) | st.sampled_from(["é", "e\u0301"])
_surrogates = st.tuples(
    st.text(max_size=3),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.text(max_size=3),
).map("".join)
_scalars = st.none() | st.booleans() | _numbers | _strings
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_strings, inner, max_size=4),
    max_leaves=12,
)


def _near(value: object) -> st.SearchStrategy[object]:
    """Values a digest could confuse with `value`: the same number as the other type, the
    next double, the next int, its float or int, the other zero."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return st.just(value)
    out: list[object] = [value]
    if isinstance(value, int):
        out += [value + 1, value - 1, -value]
        if abs(value) < 2**1000:
            out.append(float(value))
    else:
        out += [math.nextafter(value, math.inf), math.nextafter(value, -math.inf), -value]
        out = [v for v in out if math.isfinite(v)]  # (JSON holds no infinity)
        if value.is_integer():
            out.append(int(value))
    return st.sampled_from(out)


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[object, object]:
    """Two arguments objects, often differing only in one number's type, value or zero."""
    value = draw(_scalars)
    other = draw(_near(value))
    shape = draw(st.sampled_from(["flat", "list", "nested"]))
    if shape == "list":
        return {"n": [1, value]}, {"n": [1, other]}
    if shape == "nested":
        return {"a": {"b": value, "c": 0}}, {"a": {"c": 0, "b": other}}
    return {"count": value}, {"count": other}


@st.composite
def _spelled(draw: st.DrawFn, value: object) -> str:
    """JSON text for `value` as a model may write it: any key order and whitespace, escaped
    or raw strings, a float as `1.0`, `1e0`, `1E+0`, `10e-1` or its 17 digits."""
    space = draw(st.sampled_from(["", " ", "\n  "]))
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        forms = [repr(value), format(value, ".17e"), repr(value).replace("e", "E")]
        if value.is_integer() and abs(value) < 1e300:
            whole = "-0" if math.copysign(1.0, value) < 0 and value == 0 else str(int(value))
            forms += [whole + ".0", whole + "e0", whole + "E+0"]
            if whole.lstrip("-") != "0":
                forms.append(whole + "0e-1")
        return draw(st.sampled_from(forms))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=draw(st.booleans()))
    if isinstance(value, list):
        return "[" + f",{space}".join([draw(_spelled(v)) for v in value]) + "]"
    assert isinstance(value, dict)
    keys = draw(st.permutations(list(value)))
    items = [
        json.dumps(k, ensure_ascii=draw(st.booleans())) + f":{space}" + draw(_spelled(value[k]))
        for k in keys
    ]
    return "{" + space + f",{space}".join(items) + space + "}"


def _executor_digest(text: str) -> tuple[object, str]:
    """What the executor's first gate makes of raw JSON arguments: the value a tool will be
    given (before validation) and the digest that dedupe and approvals compare."""
    state = CallState(call=ToolCall(call_id="c", name="t", arguments=text), principal=ALICE)
    parse_arguments(SimpleNamespace(max_argument_bytes=1 << 30, digest_key=KEY), state)  # type: ignore[arg-type]
    assert state.parse_error is None, state.parse_error
    return state.arguments, state.request_digest


@given(_values)
def test_the_canonical_form_reads_back_as_the_very_value(value: object) -> None:
    """`json.loads(canonical_json(v))` is `v`, type for type: so no two values share a text."""
    assert _same(json.loads(canonical_json(value)), value)


@given(_values, _values)
def test_two_values_share_a_text_only_when_they_are_the_same(a: object, b: object) -> None:
    assert (canonical_json(a) == canonical_json(b)) == _same(a, b)


@given(st.data())
def test_every_spelling_of_one_value_gets_one_digest(data: st.DataObject) -> None:
    value = data.draw(st.dictionaries(_strings, _values, max_size=4))
    text = data.draw(_spelled(value))
    received, found = _executor_digest(text)
    assert _same(received, value)
    assert found == digest(value, KEY)


@given(_pairs(), st.data())
def test_arguments_a_tool_receives_differently_get_different_digests(
    pair: tuple[object, object], data: st.DataObject
) -> None:
    first, second = (_executor_digest(data.draw(_spelled(v))) for v in pair)
    assert (first[1] == second[1]) == _same(first[0], second[0])


@given(st.data())
def test_lone_surrogates_keep_strings_apart_and_the_executor_refuses_them(
    data: st.DataObject,
) -> None:
    lone = data.draw(_surrogates)
    assume(safe_text(lone) != lone)  # (not a high and low surrogate next to one another)
    assert canonical_json({"s": lone}) != canonical_json({"s": safe_text(lone)})
    assert _same(json.loads(canonical_json({"s": lone})), {"s": lone})
    state = CallState(
        call=ToolCall(call_id="c", name="t", arguments=json.dumps({"s": lone})), principal=ALICE
    )
    parse_arguments(SimpleNamespace(max_argument_bytes=1 << 30, digest_key=KEY), state)  # type: ignore[arg-type]
    assert state.parse_error is not None  # no tool receives one


def test_the_spellings_of_issue_23_are_three_values() -> None:
    texts = ['{"count": 41778229342798590}', '{"count": 41778229342798592}']
    texts += ['{"count": 4.177822934279859e16}', '{"count": 41778229342798592.0}']
    digests = [_executor_digest(t)[1] for t in texts]
    assert len(set(digests[:3])) == 3 and digests[2] == digests[3]
    assert _executor_digest('{"n": 1.0}')[1] == _executor_digest('{"n": 1e0}')[1]
    assert _executor_digest('{"n": 1}')[1] != _executor_digest('{"n": 1.0}')[1]


@given(key=st.binary(min_size=1, max_size=200), data=st.binary(max_size=300))
def test_the_keyed_digest_is_hmac_sha256(key: bytes, data: bytes) -> None:
    """Digests recorded under a key before must match those made now: HMAC-SHA256, whatever
    the key's length (over a block it is hashed first)."""
    assert digest_bytes(data, key) == hmac.digest(key, data, "sha256").hex()
    assert digest_bytes(data, None) == hashlib.sha256(data).hexdigest()
