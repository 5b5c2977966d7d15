"""A detector of instruction-like text in what a tool's source wrote: its description, its
schemas, its output.

What it is: a few patterns that prompt injections through tools have used in the wild
(`<IMPORTANT>` blocks, "ignore previous instructions", "do not tell the user", paths of keys
and configuration to read), invisible characters (zero-width, bidi controls, tag
characters), and tool shadowing (a description that names another source's tool). Each hit
is a `Finding` with a stable `kind`, where it was, and a short excerpt a person can read
(escaped by `visible`).

What it is not: a guarantee. A detector flags what it knows; fencing (`dialects.fence`) and
pinning (`policy.pins`) are the defenses, the findings tell a person where to look.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..core._visible import visible

__all__ = ["KINDS", "Finding", "scan_definition", "scan_text"]

KINDS = (
    "instruction-tag",
    "override",
    "secrecy",
    "sensitive-file",
    "invisible-characters",
    "shadowing",
)
"""Every `Finding.kind`, a stable code each."""

_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    (
        "instruction-tag",
        ("<", "[inst]", "[/inst]"),
        re.compile(
            r"<[ \t]{0,3}/?[ \t]{0,3}"
            r"(?:important|system|instructions?|admin|secret|hidden|critical)\b[^>]{0,40}>"
            r"|\[/?INST\]|<\|im_start\|>|<\|system\|>",
            re.IGNORECASE,
        ),
    ),
    (
        "override",
        ("ignore", "disregard", "forget", "override", "now", "instruction"),
        re.compile(
            r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+|my\s+)?"
            r"(previous|prior|above|earlier|preceding|system|original)\s+"
            r"(instructions?|prompts?|rules|directions|messages?)"
            r"|\bfrom\s+now\s+on,?\s+(you|always|never)\b"
            r"|\byou\s+are\s+now\s+(a|an|in)\b"
            r"|\bnew\s+(system\s+)?instructions?\s*:",
            re.IGNORECASE,
        ),
    ),
    (
        "secrecy",
        ("user", "mention", "reveal", "disclose"),
        re.compile(
            r"\b(do\s+not|don'?t|never)\s+(tell|mention|inform|notify|reveal\s+(this\s+)?to|"
            r"show)\s+(this\s+to\s+)?the\s+user\b"
            r"|\b(do\s+not|don'?t|never)\s+(mention|reveal|disclose)\s+(that|this|it)\b"
            r"|\bwithout\s+(telling|informing|notifying)\s+the\s+user\b"
            r"|\bthe\s+user\s+(must|should)\s+(not|never)\s+(know|see|be\s+told)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "sensitive-file",
        (".ssh", ".aws", ".env", "id_", "/etc/", "environ", "mcp.json"),
        re.compile(
            r"\.(?:ssh/|aws/credentials|env\b)|\bid_(?:rsa|ed25519|ecdsa)\b|/etc/(?:passwd|shadow)\b"
            r"|/proc/(?:self|\d+)/environ|\bmcp\.json\b",
            re.IGNORECASE,
        ),
    ),
)

"""Each kind, words one of which its text must hold (a cheap test first: most text holds
none), and its pattern."""

_INVISIBLE = re.compile(
    "[\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u2069\u3164\ufeff\uffa0\U000e0000-\U000e007f]"
)
"""Zero-width characters, bidi controls, tag characters (which spell hidden ASCII) and the
other invisible fillers a reader does not see but a model reads."""

_EXCERPT = 80
_MAX_FINDINGS = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One instruction-like piece of text found by the detector."""

    kind: str
    """What it looks like: one of `KINDS`."""
    where: str
    """A JSON pointer to the text in what was scanned (`/description`), "" for plain text."""
    excerpt: str
    """The text around it, short, with invisible characters written as escapes."""

    def to_dict(self) -> dict[str, str]:
        """JSON form."""
        return {"kind": self.kind, "where": self.where, "excerpt": self.excerpt}


def scan_text(text: str, *, where: str = "") -> tuple[Finding, ...]:
    """The findings in one text, at most one per kind, in `KINDS` order."""
    found: list[Finding] = []
    ascii_only = text.isascii()  # (none of the invisible characters is ASCII)
    folded = text.lower() if ascii_only else text.casefold()
    for kind, words, pattern in _PATTERNS:
        if not any(word in folded for word in words):
            continue
        match = pattern.search(text)
        if match is not None:
            found.append(Finding(kind=kind, where=where, excerpt=_excerpt(text, match)))
    hidden = None if ascii_only else _INVISIBLE.search(text)
    if hidden is not None:
        count = len(_INVISIBLE.findall(text))
        excerpt = f"{count} invisible character(s), first: {_excerpt(text, hidden)}"
        found.append(Finding(kind="invisible-characters", where=where, excerpt=excerpt))
    return tuple(found)


def scan_definition(
    definition: Mapping[str, Any], *, other_tools: Collection[str] = ()
) -> tuple[Finding, ...]:
    """The findings in a tool definition: every text in it (its description, its schemas'
    descriptions, titles, defaults and enums, their property names too), and the names of
    `other_tools` (other sources' tools) it mentions (shadowing)."""
    found: list[Finding] = []
    names = [n for n in other_tools if _distinct(n)]
    shadow = (
        re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
        if names
        else None
    )
    for pointer, text in _texts(definition, ""):
        found.extend(scan_text(text, where=pointer))
        match = shadow.search(text) if shadow is not None else None
        if match is not None:
            excerpt = f"names {match.group(1)!r}: {_excerpt(text, match)}"
            found.append(Finding(kind="shadowing", where=pointer, excerpt=visible(excerpt)))
        if len(found) >= _MAX_FINDINGS:
            break
    return tuple(found[:_MAX_FINDINGS])


def _distinct(name: str) -> bool:
    """Whether a tool name is distinctive enough that a mention of it is one (`send_email`,
    `mail.send`), not a common word (`search`)."""
    return len(name) >= 4 and any(c in name for c in "._-")


def _texts(value: Any, pointer: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if depth > 64:
        return
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            child = f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if isinstance(key, str) and _INVISIBLE.search(key):
                yield child, key
            yield from _texts(item, child, depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _texts(item, f"{pointer}/{index}", depth + 1)


def _excerpt(text: str, match: re.Match[str]) -> str:
    start = max(0, match.start() - 20)
    piece = text[start : start + _EXCERPT]
    return visible(
        ("..." if start else "") + piece + ("..." if start + _EXCERPT < len(text) else "")
    )
