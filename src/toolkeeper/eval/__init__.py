"""Retrieval and abstention metrics on real benchmarks (see `../shared/bench/`), the
safety rates of fault-injected runs (`toolkeeper eval safety`), and the agent metrics of a
task file run through `toolkeeper.agent.Agent` (`toolkeeper eval agent`)."""

from .agent_eval import load_agent_tasks, load_script, run_agent_tasks, verify_rule
from .agent_metrics import (
    AGENT_METRICS,
    AgentTask,
    ExpectedCall,
    ObservedCall,
    TaskRun,
    agent_report,
)
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
    "AGENT_METRICS",
    "CURVE_KS",
    "EVALUATOR",
    "METRICS",
    "AbstainCounts",
    "AbstainQuery",
    "AgentTask",
    "BenchSet",
    "Catalog",
    "ExpectedCall",
    "ObservedCall",
    "Query",
    "Rate",
    "TaskRun",
    "agent_report",
    "bench_sets",
    "best_threshold",
    "complete_at",
    "evaluate_abstention",
    "evaluate_cross_catalog",
    "evaluate_retrieval",
    "evaluate_safety",
    "load_abstain_queries",
    "load_agent_tasks",
    "load_queries",
    "load_script",
    "load_tools",
    "ndcg_at",
    "percentile",
    "recall_at",
    "reciprocal_rank",
    "run_agent_tasks",
    "run_safety",
    "spec_from_record",
    "verify_rule",
]
