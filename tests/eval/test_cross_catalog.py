import shutil
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.eval.cross_catalog import bench_sets, evaluate_cross_catalog
from toolkeeper.eval.datasets import DatasetError
from toolkeeper.retrieval import adapter as adapter_module
from toolkeeper.retrieval.embed import HashingEmbedder

pytest.importorskip("numpy")
pytest.importorskip("tantivy")

FIXTURES = Path(__file__).parent / "fixtures"


def bench_root(tmp_path: Path, *names: str) -> Path:
    """A bench folder holding the fixture sets `names` in the dev sets' layout."""
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(FIXTURES / f"{name}.tools.jsonl", folder / "tools.jsonl")
        shutil.copy(FIXTURES / f"{name}.queries.jsonl", folder / "queries.dev.jsonl")
    return tmp_path


def test_bench_sets_reads_the_sets_present_each_scored_as_its_gold_is_named(
    tmp_path: Path,
) -> None:
    sets = bench_sets(bench_root(tmp_path, "bfcl", "sealtools"), limit=3)
    assert [(s.name, s.score, len(s.queries)) for s in sets] == [
        ("bfcl", "name", 3),
        ("sealtools", "id", 3),
    ]


def test_one_set_is_too_few_to_leave_one_out(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="two of"):
        bench_sets(bench_root(tmp_path, "bfcl"))


def test_each_set_is_scored_with_an_adapter_fitted_on_the_others_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sets = bench_sets(bench_root(tmp_path, "bfcl", "sealtools"))
    fitted_on: list[int] = []
    fit = adapter_module.fit_query_adapter

    def spy(data: Any, **kwargs: Any) -> Any:
        fitted_on.append(sum(len(d.positives) for d in data))
        return fit(data, **kwargs)

    monkeypatch.setattr("toolkeeper.eval.cross_catalog.fit_query_adapter", spy)
    embedder = HashingEmbedder(384)  # (the bundled adapter's dimension)
    report = evaluate_cross_catalog(sets, embedder=embedder, epochs=1, show_progress=False)
    assert report["fitted_on"] == {"bfcl": ["sealtools"], "sealtools": ["bfcl"]}
    # Leaving BFCL out fits on Seal-Tools' queries alone, and the other way round.
    assert fitted_on == [len(sets[1].queries), len(sets[0].queries)]
    for name in ("bfcl", "sealtools"):
        inside, outside = report["in_catalog"][name], report["cross_catalog"][name]
        assert inside["queries"] == outside["queries"] > 0
        assert set(inside["methods"]) == {"bm25", "dense", "hybrid"}
        assert inside["query_adapter"] != outside["query_adapter"]
        # The keyword ranking knows no adapter: the same either way.
        assert inside["methods"]["bm25"] == outside["methods"]["bm25"]
