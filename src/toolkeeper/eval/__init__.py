"""Retrieval and abstention metrics on real benchmarks (see `../shared/bench/`), and the
safety rates of fault-injected runs (`toolkeeper eval safety`)."""

from .cross_catalog import BenchSet, bench_sets, evaluate_cross_catalog
from .datasets import (
    AbstainQuery,
    Catalog,
    Query,
    load_abstain_queries,
    load_queries,
    load_tools,
    spec_from_record,
)
from .metrics import (
    AbstainCounts,
    best_threshold,
    complete_at,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
)
from .retrieval import CURVE_KS, EVALUATOR, evaluate_abstention, evaluate_retrieval
from .safety import METRICS, Rate, evaluate_safety, run_safety

__all__ = [
    "CURVE_KS",
    "EVALUATOR",
    "METRICS",
    "AbstainCounts",
    "AbstainQuery",
    "BenchSet",
    "Catalog",
    "Query",
    "Rate",
    "bench_sets",
    "best_threshold",
    "complete_at",
    "evaluate_abstention",
    "evaluate_cross_catalog",
    "evaluate_retrieval",
    "evaluate_safety",
    "load_abstain_queries",
    "load_queries",
    "load_tools",
    "ndcg_at",
    "percentile",
    "recall_at",
    "reciprocal_rank",
    "run_safety",
    "spec_from_record",
]
