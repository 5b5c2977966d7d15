"""Retrieval and abstention metrics: pure functions over ranked lists and gold sets.

What it is: Recall@k, nDCG@k, reciprocal rank, complete@k, abstention precision/recall/F1,
percentiles, and the threshold sweep used to calibrate abstention. What it is not: a runner
(see `toolkeeper.eval.retrieval`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..bench.stats import percentile as _percentile

__all__ = [
    "AbstainCounts",
    "best_threshold",
    "complete_at",
    "ndcg_at",
    "percentile",
    "recall_at",
    "reciprocal_rank",
]


def _hits(ranked: Sequence[str], gold: Collection[str], k: int) -> set[str]:
    return {item for item in ranked[:k] if item in gold}


def recall_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """|gold ∩ top-k| / |gold| (0 when there is no gold)."""
    if not gold:
        return 0.0
    return len(_hits(ranked, gold, k)) / len(set(gold))


def complete_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when every gold item is in the top k, else 0.0."""
    return 1.0 if gold and set(gold) <= set(ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: Collection[str]) -> float:
    """1 / rank of the first gold item (0 when none is ranked)."""
    for rank, item in enumerate(ranked, start=1):
        if item in gold:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Binary-relevance nDCG@k; a gold item counts at its first position only."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    seen: set[str] = set()
    dcg = 0.0
    for rank, item in enumerate(ranked[:k], start=1):
        if item in gold_set and item not in seen:
            seen.add(item)
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(gold_set), k) + 1))
    return dcg / ideal


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) by linear interpolation; 0 for no values."""
    return _percentile(values, q) if values else 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class AbstainCounts:
    """Abstention as a binary decision; the positive class is "no tool fits"."""

    true_positive: int
    false_positive: int
    false_negative: int
    true_negative: int

    @property
    def precision(self) -> float:
        """Abstentions that were right."""
        made = self.true_positive + self.false_positive
        return self.true_positive / made if made else 0.0

    @property
    def recall(self) -> float:
        """Unservable requests that were abstained on."""
        due = self.true_positive + self.false_negative
        return self.true_positive / due if due else 0.0

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @classmethod
    def count(cls, abstained: Sequence[bool], should: Sequence[bool]) -> AbstainCounts:
        """Tally decisions against the truth."""
        pairs = list(zip(abstained, should, strict=True))
        return cls(
            true_positive=sum(a and s for a, s in pairs),
            false_positive=sum(a and not s for a, s in pairs),
            false_negative=sum(s and not a for a, s in pairs),
            true_negative=sum(not a and not s for a, s in pairs),
        )


def best_threshold(confidence: Sequence[float], should: Sequence[bool]) -> tuple[float, float]:
    """The abstention threshold with the best F1 on these points, and that F1.

    A query is abstained on when its confidence is below the threshold.
    """
    best = (0.0, 0.0)
    for threshold in [*sorted(set(confidence)), max(confidence, default=0.0) + 1e-06]:
        f1 = AbstainCounts.count([c < threshold for c in confidence], should).f1
        if f1 > best[1]:
            best = (threshold, f1)
    return best
