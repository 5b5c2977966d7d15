"""Running retrieval and abstention evaluations and building their JSON reports.

What it is: `evaluate_retrieval` (one catalog, many queries: Recall@1/5/10, nDCG@10, MRR,
complete@10 for keyword, dense and fused rankings, latency, build time, schema tokens, unsafe
exposure) and `evaluate_abstention` (one small catalog per query: abstention P/R/F1 and gold in
the top 3). What it is not: a command line (see `toolkeeper.cli.eval`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..core.values import Effect, Principal
from ..retrieval.embed import Embedder, EmbeddingCache
from ..retrieval.fusion import FusionConfig
from ..retrieval.selector import Selector
from ..retrieval.tokens import count_tokens, tool_definition_json
from .datasets import AbstainQuery, Catalog, Query
from .metrics import (
    AbstainCounts,
    best_threshold,
    complete_at,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
)
from .progress import progress

__all__ = [
    "CURVE_KS",
    "EVALUATOR",
    "adapter_id",
    "evaluate_abstention",
    "evaluate_retrieval",
    "tradeoff",
]

CURVE_KS = (1, 2, 3, 5, 10, 20, 50)
"""The k values of the recall@k curves."""

EVALUATOR = Principal(id="evaluator", grants=frozenset({"*"}))
"""The principal of the evaluation: every benchmark tool is visible to it."""

_RESTRICTED = Principal(id="eval-restricted")


def adapter_id(embedder: Embedder | None) -> str | None:
    """The id of the adapter that maps `embedder`'s queries, if any (for reports)."""
    adapter = getattr(embedder, "query_adapter", None)
    return getattr(adapter, "id", None)


def _summary(ranked: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> dict[str, Any]:
    n = len(gold) or 1
    return {
        "recall@1": sum(recall_at(r, g, 1) for r, g in zip(ranked, gold, strict=True)) / n,
        "recall@5": sum(recall_at(r, g, 5) for r, g in zip(ranked, gold, strict=True)) / n,
        "recall@10": sum(recall_at(r, g, 10) for r, g in zip(ranked, gold, strict=True)) / n,
        "ndcg@10": sum(ndcg_at(r, g, 10) for r, g in zip(ranked, gold, strict=True)) / n,
        "mrr": sum(reciprocal_rank(r, g) for r, g in zip(ranked, gold, strict=True)) / n,
        "complete@10": sum(complete_at(r, g, 10) for r, g in zip(ranked, gold, strict=True)) / n,
        "curve": {
            str(k): sum(recall_at(r, g, k) for r, g in zip(ranked, gold, strict=True)) / n
            for k in CURVE_KS
        },
    }


def evaluate_retrieval(
    catalog: Catalog,
    queries: Sequence[Query],
    *,
    embedder: Embedder | None,
    cache: EmbeddingCache | None = None,
    score: str = "id",
    config: FusionConfig | None = None,
    show_progress: bool = True,
    details: bool = True,
) -> dict[str, Any]:
    """Evaluate keyword, dense and fused retrieval of `queries` over `catalog`.

    Args:
        catalog: The tools (unique names, with maps back to dataset ids and names).
        queries: Questions with gold tools.
        embedder: Dense embedder; None evaluates keyword search only.
        cache: Tool vectors kept across runs.
        score: `id` (a hit is a gold tool id) or `name` (a hit is a tool with a gold name).
        config: Fusion settings (defaults to the library's one configuration).
        show_progress: Draw a progress bar on stderr.
        details: Also count the tokens of the top 5 and measure unsafe exposure (slow on
            large query sets).
    """
    config = config or FusionConfig()
    started = time.perf_counter()
    selector = Selector(embedder=embedder, cache=cache, config=replace(config, abstain_below=None))
    selector.upsert_many(catalog.specs)
    build_seconds = time.perf_counter() - started
    label = catalog.id_of if score == "id" else catalog.name_of

    def mapped(names: Sequence[str]) -> list[str]:
        return [label[n] for n in names]

    gold = [list(q.gold_ids if score == "id" else q.gold_names) for q in queries]
    methods: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "hybrid": []}
    latencies: list[float] = []
    cpu: list[float] = []
    selected_tokens: list[int] = []
    depth = max(CURVE_KS)
    allowed = selector.allowed(EVALUATOR)
    for query in progress(queries, total=len(queries), label="queries", enabled=show_progress):
        t0, c0 = time.perf_counter(), time.process_time()
        ranking = selector.rank(query.text, allowed=allowed, depth=depth)
        latencies.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        methods["bm25"].append(mapped([n for n, _ in ranking.keyword]))
        methods["dense"].append(mapped([n for n, _ in ranking.dense]))
        methods["hybrid"].append(mapped([f.name for f in ranking.fused]))
        if not details:
            continue
        top = [selector.get(f.name) for f in ranking.fused[:5]]
        selected_tokens.append(
            sum(count_tokens(tool_definition_json(s)) for s in top if s is not None)
        )
    if embedder is None:
        del methods["dense"]
    report: dict[str, Any] = {
        "tools": len(catalog.specs),
        "queries": len(queries),
        "score": score,
        "embedder": embedder.model_id if embedder is not None else None,
        "query_adapter": adapter_id(embedder),
        "methods": {name: _summary(ranked, gold) for name, ranked in methods.items()},
        "latency_ms": {
            "p50": percentile(latencies, 50) * 1000,
            "p99": percentile(latencies, 99) * 1000,
        },
        "cpu_ms_per_query": _percentiles(cpu),
        "load_average_1m": os.getloadavg()[0],
        "index_build_seconds": build_seconds,
        "index_build_embedded": cache.misses if cache is not None else None,
    }
    if details:
        report["schema_tokens_o200k"] = {
            "all_schemas": sum(count_tokens(tool_definition_json(s)) for s in catalog.specs),
            "direct_top5_mean": sum(selected_tokens) / max(len(selected_tokens), 1),
        }
        report["unsafe_exposure_rate"] = _unsafe_exposure(selector, catalog, queries[:200])
    selector.close()
    return report


def _percentiles(seconds: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(seconds, 50) * 1000, "p99": percentile(seconds, 99) * 1000}


def _unsafe_exposure(selector: Selector, catalog: Catalog, queries: Sequence[Query]) -> float:
    """Share of selections that show a forbidden tool, once every other tool is forbidden.

    Every second tool is changed in place to require a permission the restricted principal
    lacks; its text is unchanged, so it still matches its queries as well as before. The
    others are made read-only tools anyone may use, so that the restricted principal has a
    catalog to be shown (a benchmark tool is a write tool that needs its own grant).
    """
    forbidden = [replace(spec, permissions=("bench:restricted",)) for spec in catalog.specs[::2]]
    usable = [
        replace(spec, effect=Effect.READ_ONLY, permissions=()) for spec in catalog.specs[1::2]
    ]
    selector.upsert_many([*forbidden, *usable])
    if usable and not selector.allowed(_RESTRICTED):  # pragma: no cover - a broken setup
        raise AssertionError("the restricted principal may use no tool: the check would be void")
    names = {spec.name for spec in forbidden}
    exposed = 0
    for query in queries:
        selection = selector.select(query.text, principal=_RESTRICTED, k=10, abstain=False)
        exposed += any(name in names for name in selection.names)
    return exposed / len(queries) if queries else 0.0


_SWEEP = (0.2, 0.3, 0.4, 0.5, 0.6)


def tradeoff(
    threshold: float, confidence: Sequence[float], should: Sequence[bool], top3: Sequence[bool]
) -> dict[str, float]:
    """Precision, recall and F1 of abstaining when `confidence` (of some tool fitting) is
    below `threshold`, and the share of the requests that should not abstain whose gold tool
    is in the top 3 (`top3`) and not abstained from."""
    abstain = [c < threshold for c in confidence]
    counts = AbstainCounts.count(abstain, should)
    kept = [t and not a for t, a, s in zip(top3, abstain, should, strict=True) if not s]
    return {
        "threshold": threshold,
        "precision": counts.precision,
        "recall": counts.recall,
        "f1": counts.f1,
        "gold_in_top3_answerable": sum(kept) / len(kept) if kept else 0.0,
    }


def evaluate_abstention(
    queries: Sequence[AbstainQuery],
    *,
    embedder: Embedder | None,
    cache: EmbeddingCache | None = None,
    config: FusionConfig | None = None,
    show_progress: bool = True,
    make_selector: Callable[[], Selector] | None = None,
) -> dict[str, Any]:
    """Evaluate "no tool fits" decisions, each query over its own small catalog.

    Args:
        queries: Questions with their candidate tools; no gold name means abstain.
        embedder: Dense embedder; None uses keyword search only.
        cache: Tool vectors kept across runs.
        config: Fusion and abstention settings (defaults to the library's configuration).
        show_progress: Draw a progress bar on stderr.
        make_selector: Builds an empty selector (defaults to one with `embedder`, `config`).
    """
    config = config or FusionConfig()
    abstained: list[bool] = []
    should: list[bool] = []
    confidence: list[float] = []
    top3: list[bool] = []
    ranked_top3: list[bool] = []
    latencies: list[float] = []
    for query in progress(queries, total=len(queries), label="queries", enabled=show_progress):
        selector = (
            make_selector()
            if make_selector
            else Selector(embedder=embedder, cache=cache, config=config)
        )
        selector.upsert_many(query.tools)
        t0 = time.perf_counter()
        selection = selector.select(query.text, principal=EVALUATOR, k=3, abstain=False)
        latencies.append(time.perf_counter() - t0)
        selector.close()
        threshold = config.abstain_below
        abstained.append(threshold is not None and selection.confidence < threshold)
        should.append(not query.answerable)
        confidence.append(selection.confidence)
        names = {n.split("~")[0] for n in selection.names}
        ranked_top3.append(bool(names & set(query.gold_names)))
        if query.answerable:
            top3.append(ranked_top3[-1] and not abstained[-1])
    counts = AbstainCounts.count(abstained, should)
    best, f1 = best_threshold(confidence, should)
    return {
        "queries": len(queries),
        "embedder": embedder.model_id if embedder is not None else None,
        "query_adapter": adapter_id(embedder),
        "should_abstain": sum(should),
        "threshold": config.abstain_below,
        "precision": counts.precision,
        "recall": counts.recall,
        "f1": counts.f1,
        "gold_in_top3_answerable": sum(top3) / len(top3) if top3 else 0.0,
        "best_threshold_on_this_set": {"threshold": best, "f1": f1},
        "tradeoff": [tradeoff(t, confidence, should, ranked_top3) for t in _SWEEP],
        "latency_ms": {
            "p50": percentile(latencies, 50) * 1000,
            "p99": percentile(latencies, 99) * 1000,
        },
    }
