"""The selector: hard filter, hybrid ranking, abstention — one retrieval turn.

What it is: an index of `ToolSpec`s (keyword + dense, updated per change, following a
`Catalog` when given one) and `select(query, principal=...)`, which (1) computes the tools the
principal may use — `toolkeeper.policy.may_use` and the `connected` predicate — (2) ranks only
those with BM25 and dense similarity, (3) fuses the two rankings (and merges in those of each
sentence of a request that asks for several things), and (4) abstains when the best candidate
of the whole request is too weak. What it is not: an authorization decision of its own (it asks
`may_use`) or an executor (see `toolkeeper.retrieval.meta` for `call_tool`).
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import threading
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigurationError
from ..core.values import ANONYMOUS, Principal, ToolSpec
from ..policy.grants import may_use
from .adapter import QueryAdapter
from .dense import VectorIndex
from .embed import Embedder, EmbeddingCache, MiniLMEmbedder, default_cache_path
from .fusion import AbstentionSignals, Coverage, Fused, FusionConfig, fuse, interleave
from .keyword import KeywordIndex
from .progress import embed_in_steps
from .selection import Candidate, Selection
from .text import QueryContext, clauses, compose_query, content_words, foreign_share, tool_text

if TYPE_CHECKING:
    from ..catalog.registry import Catalog, CatalogEvent

__all__ = ["META_TAG", "Ranking", "Selector"]

META_TAG = "toolkeeper.meta"
"""Tools carrying this tag (the discovery meta-tools) are never indexed or selected."""

_CONFIDENCE_DEPTH = 5
_CLAUSE_COVERAGE = 0.5
"""A clause's tool joins the request's ranking only when its text holds at least this share of
the clause's content words: "Give the date in the format YYYY." names no tool of its own.
Without it, clauses cost BFCL .006 R@5 and MetaTool .001; with it, .001 and none."""
_CLAUSE_FIRST_COVERAGE = 0.2
"""The share that a clause's first tool needs: a clause's best match that covers a third of
its words ("check the housekeeping schedule for May 30th" → `getHousekeepingSchedule`) was
left out at .5. On Seal-Tools, complete@10 .872 → .907 (with the clauses' first tools placed
2nd, see `fusion.interleave`); BFCL R@5 -.004, MetaTool unchanged."""
_QUERY_CHARS = 8192
"""Characters of a query searched at most: a pasted document costs seconds of query parsing and
adds nothing a model's request for a tool needs."""

_log = logging.getLogger("toolkeeper")

Connected = Callable[[str], bool]
"""Whether a tool source (`ToolSpec.source`) is connected right now."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Ranking:
    """The rankings behind one selection, for evaluation and debugging."""

    keyword: list[tuple[str, float]]
    """(name, BM25 score), best first."""
    dense: list[tuple[str, float]]
    """(name, cosine), best first."""
    fused: list[Fused]
    """The fused order, best first."""
    coverage: dict[str, Coverage]
    """Word coverage of every candidate of the whole query (the learned ranker's and
    abstention's signal)."""
    query_words: int
    """Content words in the query."""
    foreign: float
    """The share of the query's letters that are not Latin (`text.foreign_share`)."""
    whole: list[Fused]
    """The fused order of the whole query, before its clauses' rankings and the dense hedge
    were merged in (`fusion.interleave`); what abstention reads."""
    clauses: tuple[str, ...] = ()
    """The clauses ranked on their own (`text.clauses`), if any."""

    def abstention_signals(self) -> AbstentionSignals | None:
        """What `AbstentionModel` weighs: the best cosine and the best query-word coverage
        among the first candidates of the whole query, its content words and its share of
        letters that are not Latin (None: no candidate)."""
        top = self.whole[:_CONFIDENCE_DEPTH]
        if not top:
            return None
        similarity = max((f.similarity for f in top if f.similarity is not None), default=0.0)
        coverage = max(self.coverage[f.name].query for f in top)
        return similarity, coverage, self.query_words, self.foreign


@dataclass(slots=True)
class _Allowed:
    principal: Principal
    names: set[str]


def _whole(value: Any) -> int | None:
    """`value` as an int when it is a whole number of an integer type, else None."""
    try:
        return operator.index(value)
    except TypeError:
        return None


class Selector:
    """Ranks the tools a principal may use for a query.

    Args:
        embedder: Dense embedder; None ranks by keywords only.
        cache: Keeps tool vectors across restarts (queries are never cached).
        config: Fusion and abstention settings (one configuration for every catalog).
        connected: Whether a source is connected; None treats every source as connected.
    """

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        cache: EmbeddingCache | None = None,
        config: FusionConfig | None = None,
        connected: Connected | None = None,
    ) -> None:
        self.config = config or FusionConfig()
        self._embedder = embedder
        self._cache = cache
        self._connected = connected
        self._specs: dict[str, ToolSpec] = {}
        self._passages: dict[str, str] = {}
        self._words: dict[str, frozenset[str]] = {}
        self._name_words: dict[str, frozenset[str]] = {}
        self._keyword = KeywordIndex()
        self._dense = VectorIndex(embedder.dimension) if embedder is not None else None
        self._allowed: dict[tuple[Any, ...], _Allowed] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._owns_cache = False
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # One change or one turn at a time: the indexes are not safe to change while another
        # thread searches them (tantivy raises, a turn could read half a change).
        self._lock = threading.RLock()

    @classmethod
    def for_catalog(cls, catalog: Catalog, **kwargs: Any) -> Selector:
        """A selector over every tool of `catalog` that follows its changes from now on.

        A change made on another thread while the index is built waits for it, then applies.
        """
        selector = cls(**kwargs)
        with selector._lock:
            # Following before reading: subscribed after the read, a tool removed or changed
            # meanwhile stayed indexed as it was, and one added was never found.
            selector._unsubscribe = catalog.subscribe(partial(selector._on_event, catalog))
            try:
                selector.upsert_many(catalog.specs())
            except BaseException:
                selector.close()
                raise
        return selector

    @classmethod
    def default(
        cls,
        catalog: Catalog,
        *,
        cache: str | Path | None = None,
        query_adapter: QueryAdapter | bool = True,
        **kwargs: Any,
    ) -> Selector:
        """The bundled setup over `catalog`: MiniLM (int8 ONNX, offline) with tool vectors
        cached on disk (`cache`, default `default_cache_path()`), following the catalog;
        queries mapped by `query_adapter` (see `MiniLMEmbedder`).

        Raises:
            ImportError: the `[retrieval]` extra is not installed.
        """
        selector = cls.for_catalog(
            catalog,
            embedder=MiniLMEmbedder(query_adapter=query_adapter),
            cache=EmbeddingCache(cache or default_cache_path()),
            **kwargs,
        )
        selector._owns_cache = True  # made here: `close` closes it
        return selector

    def close(self) -> None:
        """Stop following the catalog and the embedding thread, and close the embedding
        cache if `default` opened it (one given to the selector is the giver's); idempotent.
        A closed selector answers no more searches: its index no longer follows the catalog."""
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self._owns_cache and self._cache is not None:
            with self._lock:  # (not while a change is embedding into it)
                self._cache.close()

    def _embedding_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="toolkeeper-embed")
            return self._pool

    def __len__(self) -> int:
        return len(self._specs)

    def get(self, name: str) -> ToolSpec | None:
        """The indexed spec named `name`, or None."""
        return self._specs.get(name)

    # -- index maintenance ----------------------------------------------------------------

    def _on_event(self, catalog: Catalog, event: CatalogEvent) -> None:
        # The event says which tool changed; the catalog says what it is now. Changes made on
        # two threads can reach listeners in the other order: indexing the event's own tool
        # left the older definition searchable (its old permissions and text included).
        names = {event.tool.spec.name}
        if event.previous is not None:
            names.add(event.previous.spec.name)
        with self._lock:
            for name in names:
                self._follow(catalog, name)

    def _follow(self, catalog: Catalog, name: str) -> None:
        """Index `name` as `catalog` holds it now (or not at all)."""
        tool = catalog.get(name)
        if tool is None:
            self.remove(name)
            return
        if self._specs.get(name) is tool.spec:
            return  # (an event that arrives after a later one of the same tool)
        try:
            self.upsert(tool.spec)
        except Exception as exc:
            # The catalog holds the new definition already: the tool is left out of search
            # (never shown as it was) until it is registered again.
            _log.error(
                "tool %s could not be indexed for search (%s: %s); it is left out of "
                "search until it is registered again",
                name,
                type(exc).__name__,
                exc,
            )

    def upsert(self, spec: ToolSpec) -> None:
        """Add or replace one tool; visible to the next `select`."""
        self.upsert_many([spec])

    def upsert_many(self, specs: Iterable[ToolSpec]) -> None:
        """Add or replace many tools at once (one commit, batched embedding).

        When the update fails (the embedding model, the index), the tools it carried are
        removed: a tool is never searched as it was before a change that did not take.
        """
        with self._lock:
            fresh: list[ToolSpec] = []
            for spec in specs:
                if META_TAG in spec.tags:
                    self.remove(spec.name)  # a tool it replaced is no longer what the name means
                    continue
                fresh.append(spec)
            if not fresh:
                return
            try:
                self._upsert(fresh)
            except BaseException:
                for spec in fresh:
                    self._forget(spec.name)
                raise

    def _upsert(self, fresh: list[ToolSpec]) -> None:
        texts = [tool_text(spec) for spec in fresh]
        if self._dense is not None and self._embedder is not None:
            passages = [t.dense for t in texts]
            todo = [
                (spec.name, passage)
                for spec, passage in zip(fresh, passages, strict=True)
                if self._passages.get(spec.name) != passage
            ]
            if todo:
                passages_todo = [p for _, p in todo]
                embed = (
                    partial(self._cache.embed, self._embedder)
                    if self._cache is not None
                    else self._embedder.embed
                )
                vectors = embed_in_steps(embed, passages_todo)
                for (name, passage), vector in zip(todo, vectors, strict=True):
                    self._dense.upsert(name, vector)
                    self._passages[name] = passage
        for spec, text in zip(fresh, texts, strict=True):
            self._keyword.upsert(spec.name, text, commit=False)
            self._words[spec.name] = content_words(
                f"{text.name} {text.description} {text.parameters}"
            )
            self._name_words[spec.name] = content_words(spec.name)
        self._keyword.commit()
        for spec in fresh:
            self._specs[spec.name] = spec
            for entry in self._allowed.values():
                if may_use(entry.principal, spec):
                    entry.names.add(spec.name)
                else:
                    entry.names.discard(spec.name)

    def remove(self, name: str) -> None:
        """Remove one tool; gone from the next `select`."""
        with self._lock:
            if name in self._specs:
                self._forget(name)

    def _forget(self, name: str) -> None:
        """Every trace of `name` in the indexes, as far as each holds one."""
        self._specs.pop(name, None)
        for entry in self._allowed.values():
            entry.names.discard(name)
        self._passages.pop(name, None)
        self._words.pop(name, None)
        self._name_words.pop(name, None)
        if self._dense is not None:
            self._dense.remove(name)
        self._keyword.remove(name)

    # -- the hard filter --------------------------------------------------------------------

    def allowed(self, principal: Principal) -> set[str]:
        """Names of the indexed tools `principal` may use from connected sources."""
        with self._lock:
            self._check_open()
            return set(self._allowed_names(principal))

    def _allowed_names(self, principal: Principal) -> AbstractSet[str]:
        # Not a copy when no source can be disconnected: callers only read it.
        key = (principal.tenant, principal.environment, principal.grants)
        entry = self._allowed.get(key)
        if entry is None:
            if len(self._allowed) > 256:
                self._allowed.clear()
            names = {n for n, spec in self._specs.items() if may_use(principal, spec)}
            entry = self._allowed[key] = _Allowed(principal=principal, names=names)
        if self._connected is None:
            return entry.names
        connected = self._connected
        verdict: dict[str, bool] = {}
        out: set[str] = set()
        for name in entry.names:
            source = self._specs[name].source
            ok = verdict.get(source)
            if ok is None:
                ok = verdict[source] = connected(source)
            if ok:
                out.add(name)
        return out

    def rank(self, text: str, *, allowed: AbstractSet[str], depth: int) -> Ranking:
        """Keyword, dense and fused rankings of the `allowed` tools for a composed query
        (the dense embedding reads its first `config.query_chars` characters), with the
        rankings of its clauses merged in (see `FusionConfig.clauses`)."""
        text = text[:_QUERY_CHARS]
        parts = clauses(text) if self.config.clauses else []
        with self._lock:
            self._check_open()
            return self._rank(
                text, text[: self.config.query_chars], parts, allowed=allowed, depth=depth
            )

    def _rank(
        self,
        text: str,
        dense_text: str,
        parts: Sequence[str],
        *,
        allowed: AbstractSet[str],
        depth: int,
    ) -> Ranking:
        depth = min(depth, max(len(allowed), 1))
        restrict = None if len(allowed) == len(self._specs) else allowed
        embedding = None
        if self._dense is not None and self._embedder is not None and allowed:
            # The query is embedded on another thread while BM25 (of it and of its clauses)
            # runs here (onnxruntime releases the GIL): the keyword search costs no wall time.
            embed = getattr(self._embedder, "embed_queries", self._embedder.embed)
            embedding = self._embedding_pool().submit(embed, [dense_text])
        keyword = self._search_words(text, depth, allowed, restrict)
        # Whatever needs no query vector is done before waiting for it: the clauses' rankings
        # and the whole query's words and their coverage by the keyword hits.
        clause_tools = [
            self._clause_tools(part, self._search_words(part, depth, allowed, restrict), allowed)
            for part in parts
        ]
        query_words = content_words(text)
        coverage = self._coverage(query_words, keyword, [])
        vector = embedding.result()[0] if embedding is not None else None
        whole = self._rank_one(
            text, keyword, vector, allowed, restrict, depth, words=query_words, coverage=coverage
        )
        hedge = [name for name, _ in whole.dense] if self.config.dense_hedge else []
        if not parts and not hedge:
            return whole
        return dataclasses.replace(
            whole,
            fused=interleave(whole.fused, clause_tools, hedge),
            clauses=tuple(parts),
        )

    def _clause_tools(
        self, part: str, hits: list[tuple[str, float]], allowed: AbstractSet[str]
    ) -> list[Fused]:
        """A clause's ranking by its words alone, without the tools that cover too little of
        it (they would join the request's ranking for a word or two)."""
        ranked = self._rank_one(part, hits, None, allowed, None, 0)
        return [
            f
            for i, f in enumerate(ranked.fused)
            if ranked.coverage[f.name].query
            >= (_CLAUSE_FIRST_COVERAGE if i == 0 else _CLAUSE_COVERAGE)
        ]

    def _search_words(
        self, text: str, depth: int, allowed: AbstractSet[str], restrict: AbstractSet[str] | None
    ) -> list[tuple[str, float]]:
        keyword = self._keyword.search(text, depth, allowed=restrict) if allowed else []
        if restrict is None:  # all allowed: still nothing the index holds that `allowed` lacks
            keyword = [hit for hit in keyword if hit[0] in allowed]
        return keyword

    def _rank_one(
        self,
        text: str,
        keyword: list[tuple[str, float]],
        vector: Any,
        allowed: AbstractSet[str],
        restrict: AbstractSet[str] | None,
        depth: int,
        *,
        words: frozenset[str] | None = None,
        coverage: dict[str, Coverage] | None = None,
    ) -> Ranking:
        """The rankings of one text: its keyword hits, and the dense search of its vector
        (`words`, `coverage`: its content words and their coverage so far, if known)."""
        dense: list[tuple[str, float]] = []
        similarity: dict[str, float] = {}
        if self._dense is not None and vector is not None:
            dense = self._dense.search(vector, depth, allowed=restrict)
            if restrict is None:
                dense = [hit for hit in dense if hit[0] in allowed]
            reached = {name for name, _ in dense}
            for name, _ in keyword:
                if name not in reached and name in self._dense:
                    similarity[name] = float(self._dense.vector(name) @ vector)
        query_words = content_words(text) if words is None else words
        coverage = self._coverage(query_words, keyword, dense, coverage)
        fused = fuse(keyword, dense, self.config, similarity, coverage)
        return Ranking(
            keyword=keyword,
            dense=dense,
            fused=fused,
            coverage=coverage,
            query_words=len(query_words),
            foreign=foreign_share(text),
            whole=fused,
        )

    def _coverage(
        self,
        query_words: frozenset[str],
        keyword: list[tuple[str, float]],
        dense: list[tuple[str, float]],
        known: dict[str, Coverage] | None = None,
    ) -> dict[str, Coverage]:
        """How much of `query_words` each candidate covers (`known`: some already counted;
        extended in place)."""
        size = max(len(query_words), 1)
        out: dict[str, Coverage] = {} if known is None else known
        for name, _ in (*keyword, *dense):
            if name not in out:
                words = self._name_words.get(name, frozenset())
                out[name] = Coverage(
                    query=len(query_words & self._words.get(name, frozenset())) / size,
                    name=len(words & query_words) / max(len(words), 1),
                )
        return out

    def _fit_probability(self, ranking: Ranking) -> float:
        signals = ranking.abstention_signals()
        if signals is None:
            return 0.0
        if self._dense is None:
            # The abstention model weighs the dense similarity most: without it, any keyword
            # match is taken to fit (keyword search only abstains when nothing matches).
            return 1.0
        return self.config.abstention.fit_probability(*signals)

    # -- one turn -----------------------------------------------------------------------------

    def select(
        self,
        query: str,
        *,
        principal: Principal = ANONYMOUS,
        k: int = 8,
        context: QueryContext | None = None,
        abstain: bool = True,
    ) -> Selection:
        """Rank the tools `principal` may use for `query` and keep the best `k`.

        Args:
            query: The user's message (or the model's search text).
            principal: Who the tools would act for; nothing it may not use is ever scored.
            k: How many tools to return at most.
            context: Runtime context composed into the retrieval query.
            abstain: When False, never abstain (always return the best `k`).

        Raises:
            TypeError: `query` is not a str, or `context` not a `QueryContext`.
            ValueError: `k` is not a whole number of at least 1.
            ConfigurationError: the selector is closed.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        if context is not None and not isinstance(context, QueryContext):
            raise TypeError(f"context must be a QueryContext, not {type(context).__name__}")
        # A whole number of any integer type (numpy's too, as `range` takes it); not a bool.
        whole = None if isinstance(k, bool) else _whole(k)
        if whole is None or whole < 1:
            raise ValueError(f"k must be a whole number of at least 1, not {k!r}")
        k = whole
        # Each search reads so much of the query, the context always included.
        text = compose_query(query, context, max_chars=_QUERY_CHARS)
        dense_text = (
            text  # (the same text when nothing had to be cut)
            if len(text) <= self.config.query_chars
            else compose_query(query, context, max_chars=self.config.query_chars)
        )
        # A request of several sentences: each is ranked on its own too (context aside).
        parts = clauses(query[:_QUERY_CHARS]) if self.config.clauses else []
        with self._lock:
            self._check_open()
            return self._select(text, dense_text, parts, principal, k, abstain)

    def _check_open(self) -> None:
        # Closed, it no longer follows the catalog: a tool removed, or changed to need a
        # permission the principal lacks, was still searched as it had been.
        if self._closed:
            raise ConfigurationError("this selector is closed")

    def _select(
        self,
        text: str,
        dense_text: str,
        parts: Sequence[str],
        principal: Principal,
        k: int,
        abstain: bool,
    ) -> Selection:
        allowed = self._allowed_names(principal)
        depth = max(k, self.config.depth)
        ranking = self._rank(text, dense_text, parts, allowed=allowed, depth=depth)
        fused = ranking.fused
        candidates = tuple(
            Candidate(
                spec=self._specs[f.name],
                score=f.score,
                keyword_rank=f.keyword_rank,
                dense_rank=f.dense_rank,
                similarity=f.similarity,
            )
            for f in fused[:k]
        )
        confidence = self._fit_probability(ranking)
        threshold = self.config.abstain_below
        abstained = abstain and threshold is not None and (not candidates or confidence < threshold)
        return Selection(
            query=text,
            candidates=() if abstained else candidates,
            principal=principal,
            abstained=abstained,
            confidence=confidence,
            considered=len(allowed),
        )
