"""Retrieval and abstention metrics on real benchmarks (see `../shared/bench/`)."""

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

__all__ = [
    "CURVE_KS",
    "EVALUATOR",
    "AbstainCounts",
    "AbstainQuery",
    "Catalog",
    "Query",
    "best_threshold",
    "complete_at",
    "evaluate_abstention",
    "evaluate_retrieval",
    "load_abstain_queries",
    "load_queries",
    "load_tools",
    "ndcg_at",
    "percentile",
    "recall_at",
    "reciprocal_rank",
    "spec_from_record",
]
