"""Fusing keyword and dense rankings, and the model that decides to abstain.

What it is: weighted reciprocal rank fusion of two ranked lists, the abstention model, and
the one frozen configuration every catalog shares. What it is not: a search — the lists come
from `keyword` and `dense`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["AbstentionModel", "Fused", "FusionConfig", "fuse"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AbstentionModel:
    """How likely it is that no tool fits: a logistic model over three catalog-free signals.

    `logit = bias + similarity_weight * s + coverage_weight * c + length_weight * log(1 + n)`
    where `s` is the best cosine similarity among the top candidates, `c` the share of the
    query's content words that the best-covering candidate's text contains, and `n` the number
    of content words in the query. The defaults were fitted once on the BFCL abstention dev set
    (5-fold cross-validated F1 0.775 at probability 0.5) and hold for every catalog.
    """

    bias: float = 3.5338
    similarity_weight: float = -5.7753
    coverage_weight: float = -1.5776
    length_weight: float = -0.698

    def fit_probability(self, similarity: float, coverage: float, query_words: int) -> float:
        """The probability that some candidate fits (1 minus the abstention probability)."""
        logit = (
            self.bias
            + self.similarity_weight * similarity
            + self.coverage_weight * coverage
            + self.length_weight * math.log1p(query_words)
        )
        return 1.0 - 1.0 / (1.0 + math.exp(-max(min(logit, 50.0), -50.0)))


@dataclass(frozen=True, kw_only=True, slots=True)
class FusionConfig:
    """How rankings are fused and when the selector abstains (one setting for all catalogs).

    Weighted reciprocal rank fusion: a tool scores `w / (rrf_k + rank)` in each list that ranks
    it. A small `rrf_k` lets the head of either list win: on the dev sets dense similarity wins
    on paraphrased requests (MetaTool), BM25 on requests that name the tool's words
    (Seal-Tools), and the fusion beats both on BFCL.
    """

    depth: int = 50
    """Candidates taken from each ranker before fusion."""
    rrf_k: float = 5.0
    """The rank offset of reciprocal rank fusion."""
    keyword_weight: float = 1.0
    """Weight of the keyword (BM25) ranking."""
    dense_weight: float = 1.0
    """Weight of the dense (embedding) ranking."""
    query_chars: int = 512
    """Characters of the query given to the embedder (long pastes are cut)."""
    abstain_below: float | None = 0.5
    """Abstain when the fit probability is below this; None never abstains."""
    abstention: AbstentionModel = AbstentionModel()
    """The model behind the fit probability."""


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
) -> list[Fused]:
    """Weighted reciprocal rank fusion of a keyword and a dense ranking, best first.

    Args:
        keyword: (name, BM25 score), best first.
        dense: (name, cosine), best first.
        config: Weights and the rank offset.
        similarity: Cosine of tools the dense list did not reach (for abstention only).
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
