from pathlib import Path

import pytest

from toolkeeper.eval.datasets import load_abstain_queries, load_queries, load_tools
from toolkeeper.eval.retrieval import evaluate_abstention, evaluate_retrieval
from toolkeeper.retrieval.embed import HashingEmbedder
from toolkeeper.retrieval.fusion import FusionConfig

pytest.importorskip("tantivy")

FIXTURES = Path(__file__).parent / "fixtures"


def test_retrieval_report_has_every_figure_and_no_unsafe_exposure() -> None:
    catalog = load_tools(FIXTURES / "bfcl.tools.jsonl")
    queries = load_queries(FIXTURES / "bfcl.queries.jsonl")
    report = evaluate_retrieval(
        catalog, queries, embedder=HashingEmbedder(), score="name", show_progress=False
    )
    assert set(report["methods"]) == {"bm25", "dense", "hybrid"}
    hybrid = report["methods"]["hybrid"]
    assert {"recall@1", "recall@5", "recall@10", "ndcg@10", "mrr", "complete@10"} <= set(hybrid)
    assert hybrid["recall@10"] > 0.6
    assert report["unsafe_exposure_rate"] == 0.0
    assert report["schema_tokens_o200k"]["all_schemas"] > 1000
    assert report["latency_ms"]["p50"] > 0


def test_abstention_report_counts_decisions() -> None:
    queries = load_abstain_queries(FIXTURES / "abstain.queries.jsonl")
    report = evaluate_abstention(
        queries,
        embedder=HashingEmbedder(),
        config=FusionConfig(abstain_below=0.2),
        show_progress=False,
    )
    assert report["queries"] == 20
    assert report["should_abstain"] == 10
    assert 0.0 <= report["f1"] <= 1.0
    assert report["best_threshold_on_this_set"]["f1"] >= report["f1"]


def test_recall_plot_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from toolkeeper.eval.plot import plot_recall

    report = {
        "tools": 3,
        "queries": 2,
        "methods": {"bm25": {"curve": {"1": 0.5, "5": 0.9}}, "dense": {"curve": {"1": 0.4}}},
    }
    out = tmp_path / "recall.png"
    plot_recall(report, out, title="x")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_learned_ranker_orders_real_requests_better_than_rank_fusion() -> None:
    pytest.importorskip("onnxruntime")
    from toolkeeper.retrieval.embed import MiniLMEmbedder

    catalog = load_tools(FIXTURES / "bfcl.tools.jsonl")
    queries = load_queries(FIXTURES / "bfcl.queries.jsonl")
    # Without the query adapter: with it, these 25 requests are near-perfect either way
    # (nDCG@10 .97-.98), too few to tell the rankers apart (see RankModel for the full sets).
    embedder = MiniLMEmbedder(query_adapter=False)

    def hybrid(config: FusionConfig) -> dict[str, float]:
        report = evaluate_retrieval(
            catalog, queries, embedder=embedder, score="name", config=config, show_progress=False
        )
        return report["methods"]["hybrid"]  # type: ignore[no-any-return]

    learned, rrf = hybrid(FusionConfig()), hybrid(FusionConfig(learned=False))
    assert learned["ndcg@10"] > rrf["ndcg@10"]
    assert learned["mrr"] > rrf["mrr"]
    assert learned["recall@5"] >= rrf["recall@5"]


def test_the_exposure_check_sees_a_leak_when_the_filter_lets_one_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The figure is only worth its 0.0 if a filter that failed would move it.
    from toolkeeper.eval.retrieval import _RESTRICTED, _unsafe_exposure
    from toolkeeper.retrieval.selector import Selector

    catalog = load_tools(FIXTURES / "bfcl.tools.jsonl")
    queries = load_queries(FIXTURES / "bfcl.queries.jsonl")
    selector = Selector(embedder=HashingEmbedder())
    selector.upsert_many(catalog.specs)
    assert _unsafe_exposure(selector, catalog, queries) == 0.0
    # ... while the restricted principal had the other half of the tools to be shown
    assert len(selector.allowed(_RESTRICTED)) == len(catalog.specs) // 2
    monkeypatch.setattr(Selector, "_allowed_names", lambda self, principal: set(self._specs))
    assert _unsafe_exposure(selector, catalog, queries) > 0.5
    selector.close()


def test_a_fitted_abstention_model_is_reported_with_cross_validated_figures() -> None:
    from toolkeeper.eval.adapter_fit import SWEEP, fit_abstention
    from toolkeeper.retrieval.fusion import AbstentionModel

    pytest.importorskip("onnxruntime")
    from toolkeeper.retrieval.embed import MiniLMEmbedder

    queries = load_abstain_queries(FIXTURES / "abstain.queries.jsonl")
    model, sweep = fit_abstention(queries, embedder=MiniLMEmbedder())
    assert isinstance(model, AbstentionModel)
    assert model != AbstentionModel()  # fitted, not the defaults
    assert model.similarity_weight < 0  # a closer best tool: less likely that none fits
    assert [row["threshold"] for row in sweep] == list(SWEEP)
    for row in sweep:
        assert 0.0 <= row["f1"] <= 1.0 and 0.0 <= row["gold_in_top3_answerable"] <= 1.0
    # A higher threshold abstains more: never fewer requests kept out of the top 3.
    kept = [row["gold_in_top3_answerable"] for row in sweep]
    assert kept == sorted(kept, reverse=True)


def test_fitting_abstention_needs_both_kinds_of_request() -> None:
    from toolkeeper.eval.adapter_fit import fit_abstention

    answerable = [
        q for q in load_abstain_queries(FIXTURES / "abstain.queries.jsonl") if q.gold_names
    ]
    with pytest.raises(ValueError, match="answerable requests and others"):
        fit_abstention(answerable, embedder=HashingEmbedder())
