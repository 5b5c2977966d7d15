"""The searchable text of a tool: what keyword and dense retrieval read.

What it is: pure functions from a `ToolSpec` to text (the name split on `_ . -` and camelCase,
the description, parameter names and descriptions, tags, aliases, examples) and from a user
message plus runtime context to a query. What it is not: an index or a tokenizer for a model.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..core.values import ToolSpec, name_tuple
from ..schema.canonical import safe_text

__all__ = [
    "MAX_CLAUSES",
    "QueryContext",
    "ToolText",
    "clauses",
    "compose_query",
    "content_hash",
    "content_words",
    "foreign_share",
    "has_cjk",
    "split_identifier",
    "tool_text",
]

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SEPARATORS = re.compile(r"[_.\-/:\s]+")
_MAX_PARAMS = 24
_CJK = re.compile(
    "([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+)"
)
"""Runs of Chinese, Japanese (kana) and Korean (Hangul) characters, which are written without
spaces between words (Korean between phrases)."""


def split_identifier(name: str) -> list[str]:
    """Split a tool or parameter name into lower-case words.

    `orders.get_detail` → `orders get detail`; `getHTTPResponse2` → `get http response 2`.
    A part in another script than ASCII is one word (`réserver`): camel case is a convention
    of ASCII identifiers. A run of Chinese, Japanese or Korean characters becomes its
    overlapping character pairs (`查询北京天气` → `查询 询北 北京 京天 天气`; a lone character
    stays itself), so that a word of two characters matches wherever it is written.
    """
    words: list[str] = []
    for part in _SEPARATORS.split(name):
        if part.isascii():
            words.extend(w.lower() for w in _CAMEL.findall(part))
        elif part:
            words.extend(_script_words(part))
    return words


def has_cjk(text: str) -> bool:
    """Whether `text` holds Chinese, Japanese (kana) or Korean (Hangul) characters."""
    return not text.isascii() and _CJK.search(text) is not None


def _script_words(part: str) -> list[str]:
    """A part that is not ASCII: one word, or its CJK runs as character pairs."""
    pieces = _CJK.split(part)
    if len(pieces) == 1:
        return [part.lower()]
    words: list[str] = []
    for i, piece in enumerate(pieces):
        if not piece:
            continue
        if i % 2 == 0:  # (between two CJK runs: a word of another script, or ASCII)
            words.extend(split_identifier(piece))
        elif len(piece) == 1:
            words.append(piece)
        else:
            words.extend(piece[j : j + 2] for j in range(len(piece) - 1))
    return words


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolText:
    """The searchable text of one tool, by field."""

    name: str
    """The split name followed by the raw name."""
    description: str
    """The description as written."""
    parameters: str
    """Parameter names (split) and their descriptions, nested properties included."""
    extra: str
    """Tags, aliases, title and example values."""

    @property
    def dense(self) -> str:
        """One short passage for an embedding model: the split name, description and extras.

        Parameters are left to keyword search: they would triple the passage, and the cost of
        embedding grows with its length.
        """
        head = " ".join(self.name.split(" ")[:-1]) or self.name
        parts = [f"{head}: {self.description}".strip()]
        if self.extra:
            parts.append(self.extra)
        return " ".join(parts)


def tool_text(spec: ToolSpec) -> ToolText:
    """Extract the searchable text of `spec` (model-visible fields only)."""
    name = " ".join([*split_identifier(spec.name), spec.name])
    params = " ".join(_parameter_words(spec.input_schema))
    extra_parts: list[str] = []
    if spec.title:
        extra_parts.append(spec.title)
    for alias in spec.aliases:
        extra_parts.append(" ".join([*split_identifier(alias), alias]))
    extra_parts.extend(spec.tags)
    for example in spec.examples:
        extra_parts.extend(str(v) for v in _leaves(example))
    # A lone surrogate (a server that cut an emoji in half) is no text a tokenizer or the
    # keyword index can take: it becomes U+FFFD, as in recorded results.
    return ToolText(
        name=safe_text(name),
        description=safe_text(spec.description),
        parameters=safe_text(params),
        extra=safe_text(" ".join(extra_parts)),
    )


def _parameter_words(schema: Mapping[str, Any]) -> Iterator[str]:
    seen = 0
    stack: list[Mapping[str, Any]] = [schema]
    while stack and seen < _MAX_PARAMS:
        node = stack.pop()
        props = node.get("properties")
        if not isinstance(props, Mapping):
            continue
        for pname, sub in props.items():
            seen += 1
            yield " ".join(split_identifier(str(pname)))
            if isinstance(sub, Mapping):
                desc = sub.get("description")
                if isinstance(desc, str) and desc:
                    yield desc
                items = sub.get("items")
                for child in (sub, items):
                    if isinstance(child, Mapping) and "properties" in child:
                        stack.append(child)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str | int | float):
        yield value


_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "are",
        "be",
        "with",
        "by",
        "at",
        "from",
        "as",
        "it",
        "this",
        "that",
        "what",
        "how",
        "can",
        "you",
        "me",
        "my",
        "i",
        "please",
        "do",
        "does",
        "get",
        "find",
        "give",
        "show",
        "tell",
        "about",
        "which",
        "who",
        "when",
        "where",
        "why",
        "your",
        "we",
        "our",
        "us",
        "will",
        "would",
        "could",
        "should",
    }
)
_WORD = re.compile(r"[^\W_]+")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=1 << 17)
def _token_content(token: str) -> tuple[str, ...]:
    # Catalogs and queries repeat the same tokens endlessly: split and stem each once.
    return tuple(
        _stem(word) for word in split_identifier(token) if word not in _STOP and not word.isdigit()
    )


def content_words(text: str) -> frozenset[str]:
    """Lower-case, lightly stemmed words of `text` without stop words or bare numbers."""
    words: set[str] = set()
    for token in _WORD.findall(text):
        words.update(_token_content(token))
    return frozenset(words)


def foreign_share(text: str) -> float:
    """The share of the letters of `text` that are not Latin (accented ones are), from 0 to 1:
    how much of a request is in a script (Chinese, Korean, Arabic, Thai, ...) that an English
    embedder, the bundled one included, cannot read."""
    if text.isascii():
        return 0.0
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 0.0
    latin = sum(ch.isascii() or unicodedata.name(ch, "").startswith("LATIN") for ch in letters)
    return 1.0 - latin / len(letters)


MAX_CLAUSES = 8
"""Clauses of one request ranked on their own at most (the first ones)."""

_CLAUSE_END = re.compile(r"(?<=[.?!;])\s+(?=\S)")
_CLAUSE_WORDS = 3
_MIN_CLAUSES = 3


def clauses(message: str) -> list[str]:
    """The sentences of a request that asks for several things, each to be ranked on its own;
    empty when it has fewer than three.

    A request such as "Track my package TRK123. Then update the shipment's weight. Also
    tell me about the geology of Paris." needs a tool per sentence, and one ranking of the
    whole puts the tools of its main topic first. A sentence ends at `.`, `?`, `!` or `;`
    before a space; one of fewer than three words ("Thanks.") is no request of its own. Two
    sentences are most often one request and a detail of it ("Find the distance to Rome.
    Give it in kilometres."): ranked apart, they cost BFCL and MetaTool up to .009 R@5.
    """
    parts = [p for p in _CLAUSE_END.split(message.strip()) if len(p.split()) >= _CLAUSE_WORDS]
    return parts[:MAX_CLAUSES] if len(parts) >= _MIN_CLAUSES else []


def content_hash(text: str, *, model: str) -> str:
    """A stable key for an embedding: the model id and the exact text."""
    return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryContext:
    """Runtime context that sharpens a retrieval query."""

    application: str | None = None
    """The current application, page or repository (`github: acme/shop`)."""
    plan_step: str | None = None
    """The step of the plan being worked on."""
    missing: str | None = None
    """What information is still missing."""
    recent_tools: tuple[str, ...] = ()
    """Tools used just before; their names are added as hints."""

    def __post_init__(self) -> None:
        for field in ("application", "plan_step", "missing"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{field} must be a str or None, not {type(value).__name__}")
        # One name given as text is one tool, not its characters (`"orders.get"` added the
        # hint "o r d e r s g e t"); a name that is not text failed only when selecting.
        names = name_tuple(self.recent_tools)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"recent_tools must hold str names, not {type(name).__name__}")
        object.__setattr__(self, "recent_tools", names)


def compose_query(
    message: str, context: QueryContext | None = None, *, max_chars: int | None = None
) -> str:
    """Combine the user's message with runtime context into one retrieval query.

    The message comes first (it carries the intent); context is appended in a fixed order so
    that the same inputs always give the same query. A context field that is empty or blank
    adds nothing.

    Args:
        message: The user's message (or the model's search text).
        context: Runtime context to append.
        max_chars: The query's length at most. The message is cut first (down to about half
            of it), so that the context still reaches a search that reads no further.
    """
    message = message.strip()
    tail = " ".join(_context_parts(context)) if context is not None else ""
    if max_chars is not None:
        room = max(max_chars - 1 - len(tail), (max_chars - 1) // 2) if tail else max_chars
        message = message[:room].rstrip()
    query = f"{message} {tail}" if message and tail else message or tail
    return safe_text(query if max_chars is None else query[:max_chars])


def _context_parts(context: QueryContext) -> Iterator[str]:
    # Stripped before they are tested: a blank field added a bare "need" or "in".
    step = (context.plan_step or "").strip()
    if step:
        yield step
    missing = (context.missing or "").strip()
    if missing:
        yield f"need {missing}"
    application = (context.application or "").strip()
    if application:
        yield f"in {application}"
    for name in context.recent_tools:
        yield " ".join(split_identifier(name))
