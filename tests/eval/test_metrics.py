import math

import pytest

from toolkeeper.eval.metrics import (
    AbstainCounts,
    best_threshold,
    complete_at,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
)


def test_recall_counts_gold_items_in_the_top_k() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, {"b", "z"}, 1) == 0.0
    assert recall_at(ranked, {"b", "z"}, 2) == 0.5
    assert recall_at(ranked, set(), 5) == 0.0


def test_repeated_names_count_once() -> None:
    assert recall_at(["a", "a", "b"], {"a", "b"}, 2) == 0.5
    assert ndcg_at(["a", "a"], {"a"}, 10) == 1.0


def test_complete_needs_every_gold_item() -> None:
    assert complete_at(["a", "b"], {"a", "b"}, 10) == 1.0
    assert complete_at(["a", "c"], {"a", "b"}, 10) == 0.0


def test_ndcg_and_mrr_reward_early_hits() -> None:
    assert ndcg_at(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    assert reciprocal_rank(["x", "y", "a"], {"a"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x"], {"a"}) == 0.0


def test_abstention_counts_treat_no_tool_fits_as_positive() -> None:
    counts = AbstainCounts.count([True, True, False, False], [True, False, True, False])
    assert (counts.precision, counts.recall, counts.f1) == (0.5, 0.5, 0.5)


def test_best_threshold_separates_separable_points() -> None:
    threshold, f1 = best_threshold([0.1, 0.2, 0.8, 0.9], [True, True, False, False])
    assert f1 == 1.0
    assert 0.2 < threshold <= 0.8


def test_percentile_interpolates() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([], 99) == 0.0
