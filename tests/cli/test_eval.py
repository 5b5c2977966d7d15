import json
from pathlib import Path

import pytest

from toolkeeper.cli import main

pytest.importorskip("tantivy")

FIXTURES = Path(__file__).parent.parent / "eval" / "fixtures"


def test_eval_retrieval_prints_a_json_report_and_a_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "recall.png"
    code = main(
        [
            "eval",
            "retrieval",
            "--tools",
            str(FIXTURES / "sealtools.tools.jsonl"),
            "--queries",
            str(FIXTURES / "sealtools.queries.jsonl"),
            "--no-dense",
            "--json",
            "--quiet",
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["methods"]["bm25"]["recall@10"] > 0.5
    assert report["unsafe_exposure_rate"] == 0.0
    assert plot.exists()


def test_eval_abstain_prints_precision_recall_and_f1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "eval",
            "abstain",
            "--queries",
            str(FIXTURES / "abstain.queries.jsonl"),
            "--no-dense",
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert {"precision", "recall", "f1", "gold_in_top3_answerable"} <= set(report)
