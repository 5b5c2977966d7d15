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
from dataclasses import dataclass
from typing import Any

from ..retrieval._deps import require
from ..retrieval.adapter import AdapterSet, QueryAdapter
from ..retrieval.embed import Embedder, EmbeddingCache
from ..retrieval.fusion import FusionConfig
from ..retrieval.text import tool_text
from .datasets import Catalog, Query

__all__ = ["FitData", "adapter_set", "dense_recall", "split"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FitData:
    """One catalog's training data, with what scores it as `eval retrieval` does."""

    data: AdapterSet
    labels: Sequence[str]
    """Each tool row's dataset id (or name, when scored by name)."""
    gold: Sequence[Sequence[str]]
    """Each query's gold ids (or names)."""


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
    passages = [tool_text(spec).dense for spec in catalog.specs]
    tools = cache.embed(embedder, passages) if cache is not None else embedder.embed(passages)
    label = catalog.name_of if score == "name" else catalog.id_of
    rows: dict[str, list[int]] = {}
    for row, spec in enumerate(catalog.specs):
        rows.setdefault(label[spec.name], []).append(row)
    cut = FusionConfig().query_chars
    texts = [q.text[:cut] for q in queries]
    vectors = (
        embedder.embed(texts) if texts else np.zeros((0, embedder.dimension), dtype=np.float32)
    )
    gold = [tuple(q.gold_names if score == "name" else q.gold_ids) for q in queries]
    positives = [[r for g in wanted for r in rows.get(g, ())] for wanted in gold]
    return FitData(
        data=AdapterSet(queries=vectors, tools=np.asarray(tools), positives=positives),
        labels=[label[spec.name] for spec in catalog.specs],
        gold=gold,
    )


def split(fit: FitData, seed: int = 0) -> tuple[FitData, FitData]:
    """Two halves of `fit`'s queries, drawn at random (`seed`); the tools stay whole."""
    data = fit.data
    order = list(range(len(data.positives)))
    random.Random(seed).shuffle(order)
    half = len(order) // 2

    def part(rows: list[int]) -> FitData:
        return FitData(
            data=AdapterSet(
                queries=data.queries[rows],
                tools=data.tools,
                positives=[data.positives[i] for i in rows],
            ),
            labels=fit.labels,
            gold=[fit.gold[i] for i in rows],
        )

    return part(order[:half]), part(order[half:])


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
