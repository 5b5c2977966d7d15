"""Fusing keyword and dense rankings, and the model that decides to abstain.

What it is: the learned linear ranker that orders the candidates of both lists by seven
signals (the default), weighted reciprocal rank fusion (the fallback), the abstention model,
and the one frozen configuration every catalog shares. What it is not: a search — the lists
come from `keyword` and `dense`, the word coverage from `selector`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "AbstentionModel",
    "AbstentionSignals",
    "Coverage",
    "Fused",
    "FusionConfig",
    "RankModel",
    "fuse",
    "interleave",
]


AbstentionSignals = tuple[float, float, int, float]
"""What `AbstentionModel` weighs for one request: the best cosine, the best coverage, the
content words and the foreign share (`selector.Ranking.abstention_signals`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AbstentionModel:
    """How likely it is that no tool fits: a logistic model over four catalog-free signals.

    `logit = bias + similarity_weight * s + coverage_weight * c + length_weight * log(1 + n)
    + foreign_weight * f` where `s` is the best cosine similarity among the top candidates,
    `c` the share of the query's content words that the best-covering candidate's text
    contains, `n` the number of content words in the query, and `f` the share of its letters
    that are not Latin (`text.foreign_share`): the bundled embedder reads English, so a low
    similarity says little about a request in Chinese or Korean. The defaults were fitted
    for the bundled embedder and its `QueryAdapter` by `toolkeeper eval fit-adapter --abstain`
    on the BFCL abstention dev set, on what requests look like to an adapter that never saw
    them (see `toolkeeper.eval.adapter_fit.cross_fitted_abstention`). 5-fold cross-validated
    there, at `FusionConfig.abstain_below` 0.28: precision .946, recall .711, F1 .812, with
    the gold tool in the top 3 (and not abstained from) for .973 of answerable requests; at
    0.3, F1 .815 and .968; at 0.5, .834 and .933. Without the fourth signal (and with the
    adapter fitted as before: abstention weight 10, 10 epochs), F1 was .771 at a top-3 share
    of .972; before the adapter learned from such requests at all, .74 at .97.
    """

    bias: float = 4.9331
    similarity_weight: float = -9.8534
    coverage_weight: float = -0.8916
    length_weight: float = -0.7492
    foreign_weight: float = -2.0097

    @staticmethod
    def features(
        similarity: float, coverage: float, query_words: int, foreign: float = 0.0
    ) -> tuple[float, float, float, float]:
        """What the weights multiply, in their order (after `bias`): the signals, with the
        query's length as `log(1 + n)`. `toolkeeper eval fit-adapter` fits on these."""
        return similarity, coverage, math.log1p(query_words), foreign

    @classmethod
    def of_weights(cls, weights: Sequence[float]) -> AbstentionModel:
        """The model of `bias` and the weights of `features`, in that order."""
        bias, similarity, coverage, length, foreign = (float(w) for w in weights)
        return cls(
            bias=bias,
            similarity_weight=similarity,
            coverage_weight=coverage,
            length_weight=length,
            foreign_weight=foreign,
        )

    def fit_probability(
        self, similarity: float, coverage: float, query_words: int, foreign: float = 0.0
    ) -> float:
        """The probability that some candidate fits (1 minus the abstention probability)."""
        s, c, length, f = self.features(similarity, coverage, query_words, foreign)
        logit = (
            self.bias
            + self.similarity_weight * s
            + self.coverage_weight * c
            + self.length_weight * length
            + self.foreign_weight * f
        )
        return 1.0 - 1.0 / (1.0 + math.exp(-max(min(logit, 50.0), -50.0)))


@dataclass(frozen=True, kw_only=True, slots=True)
class Coverage:
    """How much of the query a candidate's words cover, for the learned ranker."""

    query: float
    """Share of the query's content words found in the tool's text."""
    name: float
    """Share of the tool name's content words found in the query."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RankModel:
    """A linear score over seven signals of each candidate; higher ranks first.

    `score = keyword_rank / log2(1 + r_kw) + dense_rank / log2(1 + r_dense) + keyword_hit
    + log_bm25 * log(1 + bm25) + relative_cosine * cos / max_cos + coverage * c_query
    + name_coverage * c_name`, where a term is 0 when the candidate is missing from that list.
    The weights were fitted once, with the bundled embedder (MiniLM, int8), by pairwise
    logistic regression on the three retrieval dev sets (BFCL, MetaTool, Seal-Tools; each
    weighted equally, gold tools against the 30 strongest other candidates) and hold for every
    catalog. 5-fold cross-validated R@5 against reciprocal rank fusion on the same candidates:
    BFCL .818 vs .813, MetaTool .763 vs .752 (3,000 random queries), Seal-Tools .882 vs .817.
    They were fitted before queries were mapped by the `QueryAdapter`; with it (fitted on one
    half of each set's queries, scored on the other half), R@5 against reciprocal rank fusion
    is BFCL .878 vs .891, MetaTool .885 vs .869, Seal-Tools .865 vs .806. Weights fitted again
    on the adapted signals gained on BFCL and MetaTool what they lost on Seal-Tools (.837),
    so these were kept.
    """

    keyword_rank: float = 1.2459
    dense_rank: float = 1.0909
    keyword_hit: float = -2.1082
    log_bm25: float = 0.8744
    relative_cosine: float = 2.6746
    coverage: float = 4.5264
    name_coverage: float = 1.9235


@dataclass(frozen=True, kw_only=True, slots=True)
class FusionConfig:
    """How rankings are fused and when the selector abstains (one setting for all catalogs).

    By default the candidates of both lists are ordered by `RankModel`, which weighs their
    ranks with how many of the query's words they cover and how close their vectors are. With
    `learned=False`, or without word coverage or a dense ranking, weighted reciprocal rank
    fusion orders them: a tool scores `w / (rrf_k + rank)` in each list that ranks it.
    """

    depth: int = 50
    """Candidates taken from each ranker before fusion."""
    learned: bool = True
    """Order candidates with `ranker` (else reciprocal rank fusion)."""
    ranker: RankModel = RankModel()
    """The learned ranker's weights."""
    rrf_k: float = 5.0
    """The rank offset of reciprocal rank fusion."""
    keyword_weight: float = 1.0
    """Weight of the keyword (BM25) ranking."""
    dense_weight: float = 1.0
    """Weight of the dense (embedding) ranking."""
    query_chars: int = 512
    """Characters of the query given to the embedder (long pastes are cut; the context kept)."""
    abstain_below: float | None = 0.28
    """Abstain when the fit probability is below this; None never abstains. 0.28 is the
    highest threshold at which the gold tool stays in the top 3 for 97% of answerable requests
    on the BFCL abstention dev set (cross-validated; see `AbstentionModel`)."""
    abstention: AbstentionModel = AbstentionModel()
    """The model behind the fit probability."""
    clauses: bool = True
    """Rank each sentence of a request of three sentences or more on its own too, by its words,
    and merge those rankings into the request's (see `interleave`): a request that asks for
    several things gets a tool for each."""
    dense_hedge: bool = True
    """Place the dense ranking's r-th tool no lower than the (2r + 1)-th (see `interleave`):
    the learned ranker never buries what the dense ranking alone puts first."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fused:
    """One tool after fusion."""

    name: str
    score: float
    keyword_rank: int | None = None
    dense_rank: int | None = None
    similarity: float | None = None


@dataclass(slots=True)
class _Acc:
    score: float = 0.0
    keyword_rank: int | None = None
    dense_rank: int | None = None
    similarity: float | None = None


def fuse(
    keyword: Sequence[tuple[str, float]],
    dense: Sequence[tuple[str, float]],
    config: FusionConfig,
    similarity: Mapping[str, float] | None = None,
    coverage: Mapping[str, Coverage] | None = None,
) -> list[Fused]:
    """Order the union of a keyword and a dense ranking, best first.

    Args:
        keyword: (name, BM25 score), best first.
        dense: (name, cosine), best first.
        config: The ranker, or the weights and rank offset of reciprocal rank fusion.
        similarity: Cosine of tools the dense list did not reach.
        coverage: Word coverage of every candidate; needed by the learned ranker.
    """
    acc: dict[str, _Acc] = {}
    for rank, (name, _score) in enumerate(keyword, start=1):
        entry = acc.setdefault(name, _Acc())
        entry.keyword_rank = rank
        entry.score += config.keyword_weight / (config.rrf_k + rank)
    for rank, (name, cosine) in enumerate(dense, start=1):
        entry = acc.setdefault(name, _Acc())
        entry.dense_rank = rank
        entry.similarity = cosine
        entry.score += config.dense_weight / (config.rrf_k + rank)
    if similarity:
        for name, entry in acc.items():
            if entry.similarity is None and name in similarity:
                entry.similarity = similarity[name]
    if config.learned and coverage is not None and dense:
        _learned_scores(acc, keyword, coverage, config.ranker)
    ranked = sorted(acc.items(), key=lambda item: (-item[1].score, item[0]))
    return [
        Fused(
            name=name,
            score=e.score,
            keyword_rank=e.keyword_rank,
            dense_rank=e.dense_rank,
            similarity=e.similarity,
        )
        for name, e in ranked
    ]


def _learned_scores(
    acc: Mapping[str, _Acc],
    keyword: Sequence[tuple[str, float]],
    coverage: Mapping[str, Coverage],
    model: RankModel,
) -> None:
    """Replace every candidate's score by `model`'s (see `RankModel` for the formula)."""
    bm25 = dict(keyword)
    top_cosine = max((e.similarity or 0.0 for e in acc.values()), default=0.0)
    none = Coverage(query=0.0, name=0.0)
    for name, e in acc.items():
        score = 0.0
        if e.keyword_rank is not None:
            score += model.keyword_rank / math.log2(1 + e.keyword_rank) + model.keyword_hit
            score += model.log_bm25 * math.log1p(max(bm25.get(name, 0.0), 0.0))
        if e.dense_rank is not None:
            score += model.dense_rank / math.log2(1 + e.dense_rank)
        if e.similarity is not None and top_cosine > 0:
            score += model.relative_cosine * e.similarity / top_cosine
        cov = coverage.get(name, none)
        e.score = score + model.coverage * cov.query + model.name_coverage * cov.name


def interleave(
    whole: Sequence[Fused], clauses: Sequence[Sequence[Fused]], dense: Sequence[str] = ()
) -> list[Fused]:
    """The ranking of a whole request with those of its clauses and its dense ranking merged
    in, so that every part of the request and each ranker gets a place near the top.

    A clause's first tool counts as the request's 2nd, its r-th (r > 1) as the (2r + 1)-th: the
    request's own first two lead, then each clause's first, then the request's third, and so
    on. The dense ranking's r-th tool (`dense`, names) counts as the (2r + 1)-th at worst: the
    learned ranker may put a tool below where the dense ranking alone would, never far below.
    A tool keeps its best place; at one place the request's own ranking comes first, then the
    clauses in their order, then the dense ranking. A tool keeps the scores of the whole
    request's ranking when it has one there; a name of `dense` that ranking lacks is ignored.

    Measured with `toolkeeper eval retrieval --cross-catalog`, against clauses' tools placed at
    2r + 1 and kept only when they cover half their clause's words, without the dense ranking:
    Seal-Tools R@5 .910 → .929 and complete@10 .872 → .908 (in-catalog; cross-catalog .873 →
    .906), BFCL R@5 .901 → .913 in-catalog and .829 → .828 cross-catalog, MetaTool .892 →
    .893 and .806 either way (docs/retrieval.md).
    """
    place: dict[str, tuple[int, int]] = {}
    found: dict[str, Fused] = {}
    for rank, fused in enumerate(whole, start=1):
        place.setdefault(fused.name, (rank, 0))
        found.setdefault(fused.name, fused)
    for source, ranking in enumerate(clauses, start=1):
        for rank, fused in enumerate(ranking, start=1):
            key = (2 if rank == 1 else 2 * rank + 1, source)
            if fused.name not in place or key < place[fused.name]:
                place[fused.name] = key
            found.setdefault(fused.name, fused)
    hedge = len(clauses) + 1
    for rank, name in enumerate(dense, start=1):
        key = (2 * rank + 1, hedge)
        if name in found and key < place[name]:
            place[name] = key
    return [found[name] for name in sorted(place, key=place.__getitem__)]
