from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.eval import adapter_fit
from toolkeeper.eval.adapter_fit import adapter_set, cross_fitted_abstention
from toolkeeper.eval.datasets import AbstainQuery, load_abstain_queries, load_queries, load_tools
from toolkeeper.retrieval.embed import HashingEmbedder

pytest.importorskip("numpy")
pytest.importorskip("tantivy")

FIXTURES = Path(__file__).parent / "fixtures"


def test_no_request_reaches_the_adapter_that_measures_it_through_a_copy_in_the_other_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = HashingEmbedder()
    catalog = load_tools(FIXTURES / "bfcl.tools.jsonl")
    fit = adapter_set(
        catalog, load_queries(FIXTURES / "bfcl.queries.jsonl"), embedder=embedder, score="name"
    )
    once = load_abstain_queries(FIXTURES / "abstain.queries.jsonl")
    requests = once + once  # every request twice: some copies land in the other half
    taught: list[set[str]] = []
    measured: list[set[str]] = []
    abstain_set, abstention_signals = adapter_fit.abstain_set, adapter_fit.abstention_signals

    def teach(queries: Sequence[AbstainQuery], **kwargs: Any) -> Any:
        taught.append({q.text for q in queries})
        return abstain_set(queries, **kwargs)

    def measure(queries: Sequence[AbstainQuery], **kwargs: Any) -> Any:
        measured.append({q.text for q in queries})
        return abstention_signals(queries, **kwargs)

    monkeypatch.setattr(adapter_fit, "abstain_set", teach)
    monkeypatch.setattr(adapter_fit, "abstention_signals", measure)
    cross_fitted_abstention([fit], requests, embedder=embedder, epochs=1)
    assert len(taught) == len(measured) == 2
    for seen, held in zip(taught, measured, strict=True):
        assert held and not seen & held
