"""Text a person reads, with what could hide or reorder it written as escapes.

Every rendering of model-proposed text for a person (an approval question, the approvals and
ledger command lines, as tables, text or JSON) goes through `visible`: a bidi override or
isolate (U+202A-U+202E, U+2066-U+2069), a zero-width or other format character (U+200B-U+200F,
U+2060, U+FEFF, tags), a control character (an ANSI escape sequence, C1), a line or paragraph
separator, a surrogate, a private-use or unassigned code point, or another default-ignorable
one (a variation selector, a Hangul filler) would otherwise let the text shown differ from the
text approved. Each becomes its JSON string escape (`\\r`, `\\u202e`; beyond the BMP, its
UTF-16 surrogate pair): escaped JSON text stays valid JSON of the same values.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from typing import Any

__all__ = ["VisibleFormatter", "visible", "visible_json"]

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""The Unicode categories escaped: control, format, surrogate, private use, unassigned, line
and paragraph separators."""

_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
"""The default-ignorable code points of no category above (a combining grapheme joiner,
Hangul fillers, variation selectors, Khmer and Mongolian invisibles): shown as nothing, or
as blank, they too let two different texts look the same."""

_SHORT = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
"""The control characters JSON has a short escape for."""


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    point = ord(char)
    if point > 0xFFFF:
        point -= 0x10000
        return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"
    return f"\\u{point:04x}"


def visible(text: str, *, keep: str = "") -> str:
    """`text` with every control, format, separator, surrogate, private-use, unassigned and
    default-ignorable character but those in `keep` written as its JSON string escape."""
    if text.isprintable() and not _IGNORABLE.search(text):  # (the common text: nothing to do)
        return text
    return "".join(
        _escape(c)
        if c not in keep and (unicodedata.category(c) in _HIDDEN or _IGNORABLE.match(c))
        else c
        for c in text
    )


def visible_json(value: Any, **options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **options)` with what `visible` escapes
    escaped: the text as written (Cyrillic stays Cyrillic), valid JSON of the same value."""
    return visible(json.dumps(value, ensure_ascii=False, **options), keep="\n")


class VisibleFormatter(logging.Formatter):
    """A log formatter for a console a person reads: each line as `logging.Formatter` makes
    it, with what `visible` escapes escaped (an ANSI escape in a proposed call id or an
    upstream's tool name would recolour, move or clear the terminal). Line breaks are kept,
    for tracebacks: a value that may hold one is logged by its repr."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record), keep="\n")
