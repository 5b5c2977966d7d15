"""Fitting the query adapter on benchmark files, and checking it on queries it never saw.

What it is: `adapter_set` turns one catalog and its queries into the vectors and gold rows
`fit_query_adapter` needs (tool vectors through the embedding cache, query vectors as the
selector makes them before the adapter); `split` halves each set's queries at random, so that
`dense_recall` can score an adapter fitted on one half on the other half. What it is not: the
adapter itself (see `toolkeeper.retrieval.adapter`) or a command line (see `toolkeeper.cli.eval`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from ..core.values import ToolSpec
from ..retrieval._deps import require
from ..retrieval.adapter import (
    ABSTAIN_WEIGHT,
    EPOCHS,
    AbstainSet,
    AdapterSet,
    QueryAdapter,
    fit_query_adapter,
    sigmoid,
)
from ..retrieval.embed import Embedder, EmbeddingCache
from ..retrieval.fusion import AbstentionModel, AbstentionSignals, FusionConfig
from ..retrieval.selector import Selector
from ..retrieval.text import tool_text
from .datasets import AbstainQuery, Catalog, Query
from .retrieval import EVALUATOR, tradeoff

__all__ = [
    "SWEEP",
    "FitData",
    "abstain_set",
    "abstention_signals",
    "adapter_set",
    "cross_fitted_abstention",
    "dense_recall",
    "fit_abstention",
    "fit_abstention_model",
    "halves",
    "split",
]

SWEEP = (0.1, 0.15, 0.2, 0.22, 0.24, 0.26, 0.28, 0.3, 0.35, 0.4, 0.5)
"""The fit-probability thresholds `fit_abstention` reports."""

_NO_SIGNALS: AbstentionSignals = (0.0, 0.0, 0, 0.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class FitData:
    """One catalog's training data, with what scores it as `eval retrieval` does."""

    data: AdapterSet
    labels: Sequence[str]
    """Each tool row's dataset id (or name, when scored by name)."""
    gold: Sequence[Sequence[str]]
    """Each query's gold ids (or names)."""
    texts: Sequence[str] = ()
    """Each query's text."""

    def without(self, texts: AbstractSet[str]) -> FitData:
        """The same data without the queries whose text is in `texts`."""
        return self.subset([i for i, t in enumerate(self.texts) if t not in texts])

    def subset(self, rows: Sequence[int]) -> FitData:
        """These queries only (the tools stay whole)."""
        rows = list(rows)
        return FitData(
            data=AdapterSet(
                queries=self.data.queries[rows],
                tools=self.data.tools,
                positives=[self.data.positives[i] for i in rows],
            ),
            labels=self.labels,
            gold=[self.gold[i] for i in rows],
            texts=[self.texts[i] for i in rows] if self.texts else (),
        )


def adapter_set(
    catalog: Catalog,
    queries: Sequence[Query],
    *,
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    score: str = "id",
) -> FitData:
    """The training data of one catalog: its tools' vectors (as the selector indexes them),
    its queries' vectors before any adapter, and each query's gold rows (by dataset id, or by
    name with `score="name"`: every tool of a gold name is gold)."""
    np: Any = require("numpy")
    tools = _tool_vectors(catalog.specs, embedder, cache)
    label = catalog.name_of if score == "name" else catalog.id_of
    rows: dict[str, list[int]] = {}
    for row, spec in enumerate(catalog.specs):
        rows.setdefault(label[spec.name], []).append(row)
    vectors = _query_vectors(queries, embedder)
    gold = [tuple(q.gold_names if score == "name" else q.gold_ids) for q in queries]
    positives = [[r for g in wanted for r in rows.get(g, ())] for wanted in gold]
    return FitData(
        data=AdapterSet(queries=vectors, tools=np.asarray(tools), positives=positives),
        labels=[label[spec.name] for spec in catalog.specs],
        gold=gold,
        texts=[q.text for q in queries],
    )


def _tool_vectors(
    specs: Sequence[ToolSpec], embedder: Embedder, cache: EmbeddingCache | None
) -> Any:
    """The vectors of tools as the selector indexes them (through `cache`, if any)."""
    np: Any = require("numpy")
    passages = [tool_text(spec).dense for spec in specs]
    return np.asarray(
        cache.embed(embedder, passages) if cache is not None else embedder.embed(passages)
    )


def _query_vectors(queries: Sequence[Query | AbstainQuery], embedder: Embedder) -> Any:
    """The vectors of requests before any adapter, cut as the selector cuts them."""
    np: Any = require("numpy")
    if not queries:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    cut = FusionConfig().query_chars
    return embedder.embed([q.text[:cut] for q in queries])


def split(fit: FitData, seed: int = 0) -> tuple[FitData, FitData]:
    """Two halves of `fit`'s queries, drawn at random (`seed`); the tools stay whole."""
    first, second = halves(len(fit.gold), seed)
    return fit.subset(first), fit.subset(second)


def halves(n: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """0..n-1 shuffled (`seed`) and cut in two."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order[: n // 2], order[n // 2 :]


def dense_recall(
    fit: FitData, adapter: QueryAdapter | None, ks: Sequence[int] = (5, 10)
) -> dict[int, float]:
    """Recall@k of the dense ranking alone, as `eval retrieval` scores it: the share of a
    query's gold ids (or names) among the labels of its top k tools, averaged over queries
    that have gold."""
    np: Any = require("numpy")
    queries = fit.data.queries if adapter is None else adapter.apply(fit.data.queries)
    scores = np.asarray(queries) @ np.asarray(fit.data.tools).T
    deepest = min(max(ks), scores.shape[1])
    top = np.argsort(-scores, axis=1, kind="stable")[:, :deepest]
    totals = dict.fromkeys(ks, 0.0)
    counted = 0
    for row, gold in enumerate(fit.gold):
        if not gold:
            continue
        counted += 1
        wanted = set(gold)
        for k in ks:
            seen = {fit.labels[i] for i in top[row, :k].tolist()}
            totals[k] += len(wanted & seen) / len(wanted)
    return {k: totals[k] / counted if counted else 0.0 for k in ks}


def abstain_set(
    queries: Sequence[AbstainQuery], *, embedder: Embedder, cache: EmbeddingCache | None = None
) -> AbstainSet:
    """The abstention training data: each request's vector before any adapter, the vectors of
    its own catalog (as the selector indexes them), and whether one of them answers it."""
    offsets = [0]
    for q in queries:
        offsets.append(offsets[-1] + len(q.tools))
    return AbstainSet(
        queries=_query_vectors(queries, embedder),
        tools=_tool_vectors([spec for q in queries for spec in q.tools], embedder, cache),
        offsets=offsets,
        answerable=[q.answerable for q in queries],
    )


def abstention_signals(
    queries: Sequence[AbstainQuery], *, embedder: Embedder, cache: EmbeddingCache | None = None
) -> tuple[list[AbstentionSignals], list[bool]]:
    """What `AbstentionModel` weighs for each request, as the selector measures it over the
    request's own catalog with `embedder`, and whether a gold tool is among its first 3."""
    config = FusionConfig(abstain_below=None)
    signals: list[AbstentionSignals] = []
    top3: list[bool] = []
    for query in queries:
        selector = Selector(embedder=embedder, cache=cache, config=config)
        try:
            selector.upsert_many(query.tools)
            ranking = selector.rank(
                query.text, allowed=selector.allowed(EVALUATOR), depth=config.depth
            )
        finally:
            selector.close()
        signals.append(ranking.abstention_signals() or _NO_SIGNALS)
        names = {f.name.split("~")[0] for f in ranking.fused[:3]}
        top3.append(bool(names & set(query.gold_names)))
    return signals, top3


def fit_abstention(
    queries: Sequence[AbstainQuery],
    *,
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    folds: int = 5,
) -> tuple[AbstentionModel, list[dict[str, float]]]:
    """Fit `AbstentionModel` on `queries` as `embedder` lets the selector see them (see
    `fit_abstention_model`)."""
    signals, top3 = abstention_signals(queries, embedder=embedder, cache=cache)
    return fit_abstention_model(signals, top3, [q.answerable for q in queries], folds=folds)


def fit_abstention_model(
    signals: Sequence[AbstentionSignals],
    top3: Sequence[bool],
    answerable: Sequence[bool],
    *,
    folds: int = 5,
) -> tuple[AbstentionModel, list[dict[str, float]]]:
    """Fit `AbstentionModel` (logistic regression of "no tool fits" on its four signals)
    and report, cross-validated over `folds` folds, precision, recall and F1 of abstaining
    and the share of answerable requests whose gold tool is in the top 3 and not abstained
    from, at each threshold of `SWEEP`.

    Raises:
        ValueError: No request is answerable, or every one is.
    """
    np: Any = require("numpy")
    abstain = np.array([not a for a in answerable], dtype=np.float64)
    if abstain.all() or not abstain.any():
        raise ValueError("fitting abstention needs answerable requests and others")
    rows = [AbstentionModel.features(*s) for s in signals]
    features = np.c_[np.ones(len(rows)), np.asarray(rows, dtype=np.float64)]
    part = np.arange(len(rows)) % folds
    probability = np.zeros(len(rows))  # of fitting, as `AbstentionModel.fit_probability`
    for fold in range(folds):
        weights = _logistic(np, features[part != fold], abstain[part != fold])
        probability[part == fold] = 1.0 - sigmoid(np, features[part == fold] @ weights)
    should = [not a for a in answerable]
    report = [tradeoff(t, probability.tolist(), should, top3) for t in SWEEP]
    return AbstentionModel.of_weights(_logistic(np, features, abstain)), report


def cross_fitted_abstention(
    fits: Sequence[FitData],
    requests: Sequence[AbstainQuery],
    *,
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    abstain_weight: float = ABSTAIN_WEIGHT,
    epochs: int = EPOCHS,
    seed: int = 0,
) -> tuple[AbstentionModel, list[dict[str, float]]]:
    """The abstention model for an adapter fitted on `fits` and `requests`, fitted on what
    requests it never saw look like.

    An adapter fitted with `requests` tells them apart almost perfectly (it can learn each),
    so signals measured with it would make an overconfident model. Instead, each half of the
    requests is measured with an adapter fitted on the other half, and on `fits`, both
    without the requests that have the half's texts (`requests` and a retrieval set may hold
    the same request twice); the model is fitted on both halves' signals. `embedder` embeds
    without an adapter.
    """
    signals: list[AbstentionSignals] = [_NO_SIGNALS] * len(requests)
    top3 = [False] * len(requests)
    first, second = halves(len(requests), seed)
    for held, taught in ((second, first), (first, second)):
        texts = {requests[i].text for i in held}
        adapter = fit_query_adapter(
            [f.without(texts).data for f in fits],
            abstain=abstain_set(
                [requests[i] for i in taught if requests[i].text not in texts],
                embedder=embedder,
                cache=cache,
            ),
            abstain_weight=abstain_weight,
            epochs=epochs,
        )
        measured, ranked = abstention_signals(
            [requests[i] for i in held],
            embedder=_Adapted(embedder, adapter),
            cache=cache,
        )
        for i, signal, hit in zip(held, measured, ranked, strict=True):
            signals[i], top3[i] = signal, hit
    return fit_abstention_model(signals, top3, [q.answerable for q in requests])


class _Adapted:
    """An embedder whose queries another adapter maps (tool vectors unchanged)."""

    def __init__(self, embedder: Embedder, adapter: QueryAdapter) -> None:
        self._embedder = embedder
        self.query_adapter = adapter
        self.model_id = embedder.model_id
        self.dimension = embedder.dimension

    def embed(self, texts: Sequence[str]) -> Any:
        return self._embedder.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return self.query_adapter.apply(self._embedder.embed(texts))


def _logistic(np: Any, features: Any, labels: Any, ridge: float = 1e-6) -> Any:
    """Logistic regression weights by Newton's method (a tiny ridge keeps it defined when
    the classes separate)."""
    weights = np.zeros(features.shape[1])
    for _ in range(50):
        p = sigmoid(np, features @ weights)
        grad = features.T @ (p - labels) + ridge * weights
        hessian = (features * (p * (1 - p))[:, None]).T @ features + ridge * np.eye(len(weights))
        step = np.linalg.solve(hessian, grad)
        weights -= step
        if np.abs(step).max() < 1e-10:
            break
    return weights
