"""Redaction of sensitive arguments before they are stored or logged.

A field is sensitive when its schema says `writeOnly: true` or `x-sensitive: true`, or when a
tool lists its JSON pointer as sensitive. A pointer segment `*` stands for every item of an
array or every value of a map (`/credentials/*/password`), so fields inside lists and maps
are found too. Redacted values become `"[REDACTED]"`; digests are computed before redaction,
so dedupe and approvals still see the real arguments.

What a call's tool says back is masked too (`hidden_values`, `mask`): every occurrence of one
of its sensitive values in the result's data (keys, strings, a number written as one), in its
MCP content blocks (but their base64 data), its effect reference, its error's message and
details, and the traceback logged when the tool raises, is replaced by `"[REDACTED]"`, once,
when the call ends: before it is recorded, audited or formatted for any model, so replays
from the ledger are masked alike. A value is found as written and as JSON text may write it
inside a string (any character as its escape; JSON text inside JSON text, four levels deep).
Values shorter than `SHORTEST_SECRET` characters are not masked (they occur in ordinary text
by chance), nor is a value the tool transformed (encoded, hashed, cut) before returning it.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..core.errors import ToolError
from ..schema.canonical import canonical_json

__all__ = [
    "ANY",
    "REDACTED",
    "SHORTEST_SECRET",
    "hidden_values",
    "log_exception",
    "mask",
    "mask_content",
    "mask_error",
    "overlaps",
    "redact",
    "sensitive_pointers",
]

REDACTED = "[REDACTED]"
"""What a sensitive value is shown as, wherever it would appear."""

ANY = "*"
"""The pointer segment for every item of an array or value of a map."""


_MEMBERS = (
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "unevaluatedProperties",
)
"""Keywords whose subschema is about every item of an array or every value of a map."""


def _walk(
    node: Any, root: Mapping[str, Any], path: tuple[str, ...], out: set[str], depth: int
) -> None:
    if not isinstance(node, Mapping) or depth > 16:
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        _walk(target, root, path, out, depth + 1)
    if node.get("writeOnly") is True or node.get("x-sensitive") is True:
        # The input schema itself marked: every argument is sensitive.
        out.add("/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path or [ANY]))
        return
    # Subschemas about the same value: its branches, and those that apply on a condition.
    same = [node.get(key) for key in ("if", "then", "else", "not")]
    for key in ("anyOf", "oneOf", "allOf"):
        same += list(node.get(key) or ())
    same += list((node.get("dependentSchemas") or {}).values())
    for sub in same:
        _walk(sub, root, path, out, depth + 1)
    props = node.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            _walk(sub, root, (*path, str(name)), out, depth + 1)
    # Items of arrays, values of maps: every one of them.
    members = [node.get(key) for key in _MEMBERS]
    members += list(node.get("prefixItems") or ())
    members += list((node.get("patternProperties") or {}).values())
    for sub in members:
        _walk(sub, root, (*path, ANY), out, depth + 1)


@lru_cache(maxsize=1024)
def _pointers(schema_key: str) -> frozenset[str]:
    schema = json.loads(schema_key)
    out: set[str] = set()
    _walk(schema, schema, (), out, 0)
    return frozenset(out)


def sensitive_pointers(schema: Mapping[str, Any], extra: Iterable[str] = ()) -> frozenset[str]:
    """JSON pointers of the object properties that must never be stored in the clear."""
    return _pointers(canonical_json(schema)) | frozenset(extra)


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def redact(arguments: Mapping[str, Any], pointers: Iterable[str]) -> dict[str, Any]:
    """A copy of `arguments` with the value at every pointer replaced by `REDACTED`."""
    if not pointers:  # (the common call: nothing to redact)
        return dict(arguments)
    pointers = list(pointers)
    out: dict[str, Any] = _copy(arguments)
    for pointer in pointers:
        parts = [_unescape(p) for p in pointer.split("/")[1:]]
        if parts:
            _blank(out, parts)
    return out


def _blank(node: Any, parts: list[str]) -> None:
    """Replace what `parts` (a pointer, `*` for every member) reaches under `node`."""
    head, rest = parts[0], parts[1:]
    if head == ANY:
        keys: Iterable[Any] = (
            range(len(node))
            if isinstance(node, list)
            else list(node)
            if isinstance(node, dict)
            else ()
        )
    elif isinstance(node, dict) and head in node:
        keys = (head,)
    elif isinstance(node, list) and head.isdigit() and int(head) < len(node):
        keys = (int(head),)
    else:
        return
    for key in keys:
        if rest:
            _blank(node[key], rest)
        else:
            node[key] = REDACTED


SHORTEST_SECRET = 4
"""Shorter sensitive values are not masked in text: they occur in ordinary words by chance,
and masking them there would garble the message."""


def hidden_values(arguments: Any, redacted: Any) -> tuple[str, ...]:
    """The strings and numbers (as text) of `arguments` that its redaction `redacted` hides
    (the value of a sensitive field, the values inside a sensitive object or array) of at
    least `SHORTEST_SECRET` characters, longest first: what a result or message about the
    call must not quote (`mask` finds them as JSON text writes them too)."""
    found: set[str] = set()
    _hidden(arguments, redacted, found)
    return tuple(sorted(found, key=len, reverse=True))


def _hidden(value: Any, shown: Any, out: set[str]) -> None:
    if isinstance(shown, str):
        if shown == REDACTED:
            _strings(value, out)
    elif isinstance(value, Mapping) and isinstance(shown, Mapping):
        for key, item in value.items():
            _hidden(item, shown.get(key), out)
    elif isinstance(value, list) and isinstance(shown, list):
        for item, shown_item in zip(value, shown, strict=False):
            _hidden(item, shown_item, out)


def _strings(value: Any, out: set[str]) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # a PIN or card number as a number is quoted as its digits
    if isinstance(value, str):
        if len(value) >= SHORTEST_SECRET:
            out.add(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out)


def mask(value: Any, secrets: tuple[str, ...]) -> Any:
    """`value` (a text, or JSON data) with every occurrence of one of `secrets` in its strings
    (and keys), as written or as JSON text inside a string writes it, four levels deep (any
    character as its escape: `\\u0041`, `\\/`, `\\"`), and every number written as one (a
    whole float as its integer too), replaced by `REDACTED`. Give them longest first (as
    `hidden_values` does), so that a secret holding another is masked whole."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        whole = isinstance(value, float) and value.is_integer() and abs(value) < 2**63
        written = str(int(value)) if whole else str(value)  # (48151623.0 is a PIN too)
        return REDACTED if written in secrets or str(value) in secrets else value
    if isinstance(value, str):
        if "\\" in value:  # JSON text, which may escape any character of a secret
            return _mask_escaped(value, secrets)
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {mask(k, secrets): mask(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask(v, secrets) for v in value]
    return value


_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
"""One escape of a JSON string: `\\u0041`, `\\"`, `\\\\`, `\\/`, `\\n`..."""

_SHORT = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

_ESCAPED = frozenset('"\\/\b\f\n\r\t')
"""The characters JSON text may write with a short escape (others only as `\\u`)."""

_DEPTH = 4
"""Levels of JSON text inside JSON text unescaped to look for a secret."""

_PLACED = 2**20
"""The longest text whose escaped secrets are cut out in place; a longer one that holds a
secret only as escapes is masked whole."""


def _decoded(found: re.Match[str]) -> str:
    body = found.group()[1:]
    return chr(int(body[1:], 16)) if body[0] == "u" else _SHORT.get(body, body)


def _decode_json(text: str, *, where: bool) -> tuple[str, array[int] | None]:
    """`text` with its JSON string escapes decoded (a surrogate pair to its character) and,
    with `where`, where each character of the result starts in `text` (one more: the end)."""
    pieces: list[str] = []
    starts = array("q") if where else None
    pos = 0
    pending: tuple[int, str] | None = None  # a high surrogate, and where it began
    for found in _ESCAPE.finditer(text):
        at, end = found.span()
        char = _decoded(found)
        if pending is not None:
            begun, high = pending
            pending = None
            if at == pos and "\udc00" <= char < "\ue000":  # the pair, one character
                pieces.append((high + char).encode("utf-16", "surrogatepass").decode("utf-16"))
                if starts is not None:
                    starts.append(begun)
                pos = end
                continue
            pieces.append(high)
            if starts is not None:
                starts.append(begun)
        pieces.append(text[pos:at])
        if starts is not None:
            starts.extend(range(pos, at))
        if "\ud800" <= char < "\udc00":
            pending = (at, char)
        else:
            pieces.append(char)
            if starts is not None:
                starts.append(at)
        pos = end
    if pending is not None:
        pieces.append(pending[1])
        if starts is not None:
            starts.append(pending[0])
    pieces.append(text[pos:])
    if starts is not None:
        starts.extend(range(pos, len(text) + 1))
    return "".join(pieces), starts


def _held(value: str, secrets: tuple[str, ...]) -> bool:
    """Whether `value` holds one of `secrets`, as written or as JSON text writes it (up to
    `_DEPTH` levels deep)."""
    escapable = any(not _ESCAPED.isdisjoint(secret) for secret in secrets)
    text = value
    for depth in range(_DEPTH + 1):
        if any(secret in text for secret in secrets):
            return True
        if depth == _DEPTH or "\\" not in text or ("\\u" not in text and not escapable):
            return False  # (what is left to decode can make no character of a secret)
        text = _decode_json(text, where=False)[0]
    return False


def _mask_escaped(value: str, secrets: tuple[str, ...]) -> str:
    """`value` with every occurrence of one of `secrets` replaced by `REDACTED`, as written
    or as JSON text writes it, up to `_DEPTH` levels deep (any character as an escape).
    Linear in the length of `value` at each level: no pattern that could backtrack."""
    if len(value) > _PLACED:
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return REDACTED if _held(value, secrets) else value
    if not _held(value, secrets):
        return value
    cuts: list[tuple[int, int]] = []
    text, starts = value, array("q", range(len(value) + 1))
    for depth in range(_DEPTH + 1):
        if depth:
            if "\\" not in text:
                break
            text, inner = _decode_json(text, where=True)
            assert inner is not None
            starts = array("q", map(starts.__getitem__, inner))
        for secret in secrets:
            at = text.find(secret)
            while at != -1:
                cuts.append((starts[at], starts[at + len(secret)]))
                at = text.find(secret, at + len(secret))
    out: list[str] = []
    pos = 0
    for start, end in sorted(cuts):
        if start >= pos:
            out += (value[pos:start], REDACTED)
            pos = end
        elif end > pos:
            pos = end  # (overlapping a cut already made: it grows)
    out.append(value[pos:])
    return "".join(out)


def mask_error(error: ToolError | None, secrets: tuple[str, ...]) -> ToolError | None:
    """`error` with `secrets` masked in its message and details (see `mask`)."""
    if error is None or not secrets:
        return error
    return replace(
        error, message=mask(error.message, secrets), details=mask(error.details, secrets)
    )


_BINARY = frozenset({"data", "blob"})
"""Keys of MCP content blocks whose text is base64: a secret found there is chance, and
masking it would break the image or file."""


def mask_content(
    blocks: tuple[Mapping[str, Any], ...] | None, secrets: tuple[str, ...]
) -> tuple[Mapping[str, Any], ...] | None:
    """MCP content blocks with `secrets` masked in every value but their base64 data."""
    if not blocks or not secrets:
        return blocks
    return tuple(
        {key: value if key in _BINARY else mask(value, secrets) for key, value in block.items()}
        for block in blocks
    )


def log_exception(log: logging.Logger, secrets: tuple[str, ...], message: str, *args: Any) -> None:
    """Log the exception being handled as `log.exception` does, with `secrets` masked in its
    traceback: then as text (the exception itself, given to a handler, would quote them)."""
    if not secrets:
        log.exception(message, *args)
        return
    log.error(f"{message}\n%s", *args, mask(traceback.format_exc().rstrip(), secrets))


def overlaps(pointers: Iterable[str], pointer: str) -> bool:
    """Whether the value at `pointer` (of an argument) is a sensitive one, is inside one, or
    holds one below it: a message quoting it would show a sensitive value."""
    parts = [_unescape(p) for p in pointer.split("/")[1:]]
    for sensitive in pointers:
        want = [_unescape(p) for p in sensitive.split("/")[1:]]
        if all(w in (ANY, p) for w, p in zip(want, parts, strict=False)):  # one starts the other
            return True
    return False


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
