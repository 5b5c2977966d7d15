"""Keyword (BM25) retrieval over tool text, on tantivy.

What it is: an in-memory tantivy index with one document per tool, updated in place (add,
replace, delete: no rebuild), searched with BM25 over weighted fields, optionally restricted to
an allowed set of tools so that nothing else is scored. What it is not: a filter of its own —
the caller decides what is allowed (see `toolkeeper.retrieval.selector`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache
from typing import Any

from ._deps import require
from .text import ToolText, split_identifier

__all__ = ["KeywordIndex", "normalize"]

_WORD = re.compile(r"[^\W_]+")
"""Runs of letters and digits, in any script (`Réserver`, `hôtel`, `予約` are words too)."""
# One field with all the text, plus the name again at half weight: separate per-field BM25
# normalization ranked worse on every benchmark (and a strong name boost worse still).
_FIELDS = ("all", "name")
_BOOSTS = {"all": 1.0, "name": 0.5}


def normalize(text: str) -> str:
    """Lower-case words with identifiers split (`getUserID` → `get user id`).

    Applied to documents and queries alike; the result holds no query-language syntax.
    """
    return " ".join(map(_normalize_token, _WORD.findall(text)))


@lru_cache(maxsize=1 << 17)
def _normalize_token(token: str) -> str:
    # Catalogs and queries repeat the same tokens endlessly: split each once.
    parts = split_identifier(token)
    if len(parts) > 1:
        parts.append(token.lower())
    return " ".join(parts)


class KeywordIndex:
    """BM25 over the text of `ToolText` (all fields, plus the name again), keyed by tool name.

    Every change is committed at once, so a search right after `upsert` or `remove` sees it.
    """

    def __init__(self) -> None:
        tantivy = require("tantivy")
        self._tantivy: Any = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw")
        for field in _FIELDS:
            builder.add_text_field(field, stored=False, tokenizer_name="en_stem")
        self._index: Any = tantivy.Index(builder.build())
        # `commit` reloads the reader itself; with tantivy's default policy (reload on commit)
        # that explicit reload waited ~100 ms for the automatic one once a search had run.
        self._index.config_reader(reload_policy="Manual")
        self._writer: Any = self._index.writer(heap_size=15_000_000, num_threads=1)
        self._keys: set[str] = set()
        self._dirty = False

    def __len__(self) -> int:
        return len(self._keys)

    def upsert(self, key: str, text: ToolText, *, commit: bool = True) -> None:
        """Add or replace the document of `key`."""
        if key in self._keys:
            self._writer.delete_documents_by_term("key", key)
        doc = self._tantivy.Document()
        doc.add_text("key", key)
        doc.add_text("all", normalize(f"{text.name} {text.description} {text.parameters}"))
        doc.add_text("all", normalize(text.extra))
        doc.add_text("name", normalize(text.name))
        self._writer.add_document(doc)
        self._keys.add(key)
        self._changed(commit)

    def remove(self, key: str, *, commit: bool = True) -> None:
        """Delete the document of `key`, if any."""
        if key not in self._keys:
            return
        self._writer.delete_documents_by_term("key", key)
        self._keys.discard(key)
        self._changed(commit)

    def commit(self) -> None:
        """Make pending changes visible to searches."""
        if self._dirty:
            self._writer.commit()
            self._index.reload()
            self._dirty = False

    def _changed(self, commit: bool) -> None:
        self._dirty = True
        if commit:
            self.commit()

    def search(
        self, query: str, k: int, *, allowed: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best documents for `query` as (key, BM25 score), best first.

        Args:
            query: Free text; it is normalized, so no query syntax is interpreted.
            k: How many results at most.
            allowed: When given, only these keys are scored.
        """
        self.commit()
        words = normalize(query)
        if not words or not self._keys or k <= 0:
            return []
        parsed = self._index.parse_query(words, list(_FIELDS), field_boosts=_BOOSTS)
        if allowed is not None:
            if not allowed:
                return []
            # Unrestricted only when every document is allowed: a set as large as the index
            # may name tools it no longer holds (taken before a change) and lack others.
            if len(allowed) < len(self._keys) or not self._keys.issubset(allowed):
                query_type = self._tantivy.Query
                restrict = query_type.const_score_query(
                    query_type.term_set_query(self._index.schema, "key", list(allowed)), 0.0
                )
                occur = self._tantivy.Occur
                parsed = self._tantivy.Query.boolean_query(
                    [(occur.Must, parsed), (occur.Must, restrict)]
                )
        searcher = self._index.searcher()
        result = searcher.search(parsed, limit=k, count=False)
        hits: list[tuple[str, float]] = []
        for score, address in result.hits:
            key = searcher.doc(address).get_first("key")
            hits.append((str(key), float(score)))
        return hits
