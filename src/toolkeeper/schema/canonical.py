"""Canonical JSON and the digests that bind approvals and dedupe to exact arguments.

The canonical form is injective over the JSON values a tool can receive: two values that differ
(in Python's terms, as `json.loads` gives them) never share a text, so never a digest. It
follows RFC 8785 (JSON Canonicalization Scheme) for keys and strings: object keys sorted by
their UTF-16 code units, no insignificant whitespace, strings escaped minimally. Numbers keep
their type where RFC 8785 would merge them: an int is its exact decimal digits, and a float is
ECMAScript's shortest form marked as a float (`1.0`, `-0.0`, `4.177822934279859e+16` is
`41778229342798590.0`), so the int `41778229342798590` and the float next to it, or `1` and
`1.0`, are different texts. `1.0` and `1e0` are one float, and one text. The text reads back
(`json.loads`) as the very value it was made from.

The digests the ledger keeps and the gateway sends to clients (its derived call ids) are
HMAC-SHA256 under the ledger's digest key (`toolkeeper.ledger.keys`): they cover sensitive
arguments, which a plain hash would let anyone holding the digest guess back.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

__all__ = [
    "canonical_json",
    "digest",
    "digest_bytes",
    "json_safe",
    "parse_canonical",
    "safe_text",
]


def _number(value: int | float) -> str:
    """A number, its type kept: an int's exact digits (RFC 8785 would round one above 2**53 to
    a double), a float's ECMAScript form with `.0` when that looks like an int (`1.0`, and
    `41778229342798590.0` for the double 41778229342798592, which ECMAScript writes as the int
    41778229342798590 is written), and `-0.0` for negative zero (ECMAScript writes `0`)."""
    if isinstance(value, bool):  # pragma: no cover - handled by the caller
        raise TypeError("bool is not a number")
    if isinstance(value, int):
        return str(int(value))  # int(): an IntEnum member prints as its name
    text = _ecmascript(float(value))
    if "." in text or "e" in text:
        return text
    if text == "0" and math.copysign(1.0, value) < 0:
        return "-0.0"
    return text + ".0"


def _ecmascript(value: float) -> str:
    """A float as ECMAScript's Number::toString (and RFC 8785) writes it: the shortest digits
    that read back as `value`, which no other double shares."""
    if not math.isfinite(value):
        raise ValueError("NaN and infinities have no JSON form")
    if value == 0:
        return "0"
    # The shortest digits that read back as `value` (what ECMAScript uses too), and the
    # position n of the decimal point relative to them: |value| = 0.DIGITS x 10**n.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    n = len(whole) + int(exponent or 0)
    significant = digits.lstrip("0")
    n -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    k = len(digits)
    sign = "-" if value < 0 else ""
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{'+' if e > 0 else '-'}{abs(e)}"


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        if not all(isinstance(k, str) for k in value):
            raise TypeError("object keys must be strings")
        # (then by code point: a lone surrogate pair and the character it makes sort as one)
        keys = sorted(value, key=lambda k: (k.encode("utf-16-be", "surrogatepass"), k))
        for i, key in enumerate(keys):
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} has no canonical JSON form")


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether `json.dumps` already writes `value` canonically: no floats (which JSON and
    the canonical form write differently) and only ASCII keys (so code point order is UTF-16
    order)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if depth > 64:
        return False
    if kind is dict:
        return all(
            type(k) is str and k.isascii() and _plain(v, depth + 1) for k, v in value.items()
        )
    if kind is list:
        return all(_plain(v, depth + 1) for v in value)
    return False


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a JSON-compatible value (see the module)."""
    if _plain(value):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def digest(value: Any, key: bytes | None = None) -> str:
    """HMAC-SHA256 (hex) under `key` of the canonical JSON of `value`; without a key, its
    plain SHA-256, for what holds nothing secret (never what goes into a ledger or to a client).

    Raises:
        TypeError, ValueError: `value` has no canonical JSON form (see `canonical_json`).
        UnicodeEncodeError: it holds a lone surrogate, which is no character.
    """
    return digest_bytes(canonical_json(value).encode("utf-8"), key)


def digest_bytes(data: bytes, key: bytes | None) -> str:
    """HMAC-SHA256 (hex) of `data` under `key`; plain SHA-256 without one."""
    if key is None:
        return hashlib.sha256(data).hexdigest()
    inner, outer = _hmac_pads(key)
    inside = inner.copy()
    inside.update(data)
    outside = outer.copy()
    outside.update(inside.digest())
    return outside.hexdigest()


@functools.lru_cache(maxsize=8)
def _hmac_pads(key: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    """SHA-256 states that have taken `key`'s inner and outer HMAC pads (RFC 2104): copied,
    they spare each digest the key set-up `hmac.digest` does anew (1.4 against 0.6 us)."""
    if len(key) > _SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    padded = key.ljust(_SHA256_BLOCK, b"\0")
    inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in padded))
    outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in padded))
    return inner, outer


_SHA256_BLOCK = 64


class _HasFloat(Exception):
    """The text holds a float literal."""


def _no_floats(text: str) -> float:
    raise _HasFloat


# msgspec parses and writes in C. Without floats its sorted, compact, UTF-8 output is the
# canonical form, except that it orders keys by code point where RFC 8785 uses UTF-16 code
# units: the two differ only around astral-plane characters (4-byte UTF-8 sequences).
_decode_without_floats = msgspec.json.Decoder(float_hook=_no_floats).decode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode
_ASTRAL = re.compile(rb"[\xf0-\xf4]")


def parse_canonical(text: str, key: bytes | None = None) -> tuple[Any, str] | None:
    """Parse JSON text and digest its canonical form, on the fast path when it is exact.

    Returns:
        (value, `digest(value, key)`), or None when the text needs the
        general path (`json.loads`, then `digest`): it holds a float, an astral-plane
        character, or something the strict parser refuses (invalid JSON, lone surrogates,
        escaped or raw, numbers out of range, nesting deeper than it goes).
    """
    try:
        value = _decode_without_floats(text)
    except (msgspec.DecodeError, _HasFloat, UnicodeEncodeError, RecursionError):
        return None
    out = _encode_sorted(value)
    if not out.isascii() and _ASTRAL.search(out):
        return None
    return value, digest_bytes(out, key)


_SCALARS = (int, float, type(None))


def safe_text(text: str) -> str:
    """`text` with each lone UTF-16 surrogate replaced by U+FFFD (see `json_safe`)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16: a surrogate pair becomes its character, a lone one U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` with every lone UTF-16 surrogate in its strings and keys replaced by U+FFFD,
    and every NaN or infinity replaced by None.

    JSON text may escape a surrogate without its pair (`"\\ud800"`), and Python decodes it to
    a string that no UTF-8 encoder, ledger or vendor API accepts. A float may be NaN or
    infinite, which JSON cannot hold: the SQLite and PostgreSQL ledgers refused it (the whole
    result became a note) while the in-memory one kept it, and a model is shown null. Tool
    results pass through here before they are recorded; what holds neither comes back as the
    same object.
    """
    if isinstance(value, str):
        return safe_text(value)
    if depth > 256 or isinstance(value, _SCALARS):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value
    if isinstance(value, dict):
        items = [
            (safe_text(k) if isinstance(k, str) else k, json_safe(v, depth + 1))
            for k, v in value.items()
        ]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        safe = [json_safe(v, depth + 1) for v in value]
        if all(a is b for a, b in zip(safe, value, strict=True)):
            return value
        return safe if isinstance(value, list) else tuple(safe)
    return value
