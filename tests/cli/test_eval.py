import json
from pathlib import Path

import pytest

from toolkeeper.cli import main
from toolkeeper.retrieval.adapter import QueryAdapter

pytest.importorskip("tantivy")

FIXTURES = Path(__file__).parent.parent / "eval" / "fixtures"


def _set(name: str, score: str = "id", queries: str | Path | None = None) -> list[str]:
    """`--set` of the fixture catalog `name` with its queries (or `queries`), scored by `score`."""
    tools = str(FIXTURES / f"{name}.tools.jsonl")
    return ["--set", tools, str(queries or FIXTURES / f"{name}.queries.jsonl"), score]


BFCL_SET = _set("bfcl", "name")
SEAL_SET = _set("sealtools")


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


def _eval(*argv: str) -> int:
    return main(["eval", *argv, "--no-dense", "--json", "--quiet"])


def test_unusable_files_are_one_line_that_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = str(FIXTURES / "sealtools.tools.jsonl")
    queries = str(FIXTURES / "sealtools.queries.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "query": "x"}\n{"id":\n', encoding="utf-8")

    assert _eval("retrieval", "--tools", str(tmp_path / "nope.jsonl"), "--queries", queries) == 2
    assert capsys.readouterr().err.startswith(f"toolkeeper eval: {tmp_path / 'nope.jsonl'}: cannot")
    assert _eval("retrieval", "--tools", tools, "--queries", str(bad)) == 2
    assert f"{bad}:2: not a JSON line" in capsys.readouterr().err
    # the files swapped: queries have no tool name
    assert _eval("retrieval", "--tools", queries, "--queries", tools) == 2
    assert "no 'name' field; is this the right file?" in capsys.readouterr().err
    assert _eval("abstain", "--queries", queries) == 2
    assert "no 'candidate_tools' field" in capsys.readouterr().err


def test_a_plot_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--tools", str(FIXTURES / "sealtools.tools.jsonl")]
    argv += ["--queries", str(FIXTURES / "sealtools.queries.jsonl")]
    assert _eval("retrieval", *argv, "--plot", str(tmp_path / "no" / "such" / "r.png")) == 2
    captured = capsys.readouterr()
    assert "--plot: the folder of" in captured.err
    assert captured.out == ""


def test_files_that_cannot_be_scored_together_are_refused_not_reported_as_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seal = str(FIXTURES / "sealtools.tools.jsonl")
    bfcl_queries = str(FIXTURES / "bfcl.queries.jsonl")
    assert _eval("retrieval", "--tools", seal, "--queries", bfcl_queries) == 2
    assert "no gold tool of" in capsys.readouterr().err
    nameless = tmp_path / "q.jsonl"
    nameless.write_text('{"id": "q1", "query": "x", "gold_tool_ids": ["a"]}\n', encoding="utf-8")
    assert _eval("retrieval", "--tools", seal, "--queries", str(nameless), "--score", "name") == 2
    assert "has gold_tool_names" in capsys.readouterr().err
    for limit in ("--limit=-3", "--limit=0"):  # no query: nothing would be measured
        with pytest.raises(SystemExit):
            _eval("retrieval", "--tools", seal, "--queries", bfcl_queries, limit)
        assert "expected a count" in capsys.readouterr().err


def test_an_empty_queries_file_is_refused_not_reported_as_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "q.jsonl"
    empty.write_text("\n", encoding="utf-8")
    seal = str(FIXTURES / "sealtools.tools.jsonl")
    assert _eval("retrieval", "--tools", seal, "--queries", str(empty)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"toolkeeper eval: no queries in {empty}\n"
    assert captured.out == ""
    assert _eval("abstain", "--queries", str(empty)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"toolkeeper eval: no queries in {empty}\n"
    assert captured.out == ""


def test_queries_whose_gold_tools_are_missing_from_the_tools_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A gold tool the catalog lacks cannot be retrieved: scored, it lowered recall as a miss.
    seal = FIXTURES / "sealtools.tools.jsonl"
    queries = FIXTURES / "sealtools.queries.jsonl"
    gold = json.loads(queries.read_text(encoding="utf-8").splitlines()[0])["gold_tool_ids"][0]
    lines = seal.read_text(encoding="utf-8").splitlines()
    tools = tmp_path / "tools.jsonl"
    tools.write_text(
        "".join(f"{line}\n" for line in lines if json.loads(line)["id"] != gold), encoding="utf-8"
    )
    assert _eval("retrieval", "--tools", str(tools), "--queries", str(queries)) == 2
    captured = capsys.readouterr()
    assert f"in {queries} name gold tools that are not in the tools given" in captured.err
    assert repr(gold) in captured.err
    assert captured.err.count("\n") == 1 and captured.out == ""


def test_the_plot_goes_to_the_png_file_named_and_the_report_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--tools", str(FIXTURES / "sealtools.tools.jsonl")]
    argv += ["--queries", str(FIXTURES / "sealtools.queries.jsonl")]
    assert _eval("retrieval", *argv, "--plot", str(tmp_path / "recall")) == 0
    assert json.loads(capsys.readouterr().out)["plot"] == str(tmp_path / "recall.png")
    assert (tmp_path / "recall.png").exists()


@pytest.mark.parametrize(
    ("name", "message"), [("plots", "is a folder: name the PNG file"), ("r.txt", "name a .png")]
)
def test_a_plot_that_is_no_png_file_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    (tmp_path / "plots").mkdir()
    argv = ["--tools", str(FIXTURES / "sealtools.tools.jsonl")]
    argv += ["--queries", str(FIXTURES / "sealtools.queries.jsonl")]
    assert _eval("retrieval", *argv, "--plot", str(tmp_path / name)) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots"]


def test_a_cache_in_a_folder_that_does_not_exist_is_a_usage_error_and_makes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "no" / "such" / "c.sqlite"
    queries = str(FIXTURES / "abstain.queries.jsonl")
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "abstain", "--queries", queries, "--cache", str(cache)])
    assert exit_info.value.code == 2
    assert f"argument --cache: the folder of {cache} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("kind", ["symlink loop", "name too long"])
def test_an_output_path_that_cannot_be_followed_is_one_line_for_every_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    if kind == "symlink loop":
        (tmp_path / "a").symlink_to(tmp_path / "b")
        (tmp_path / "b").symlink_to(tmp_path / "a")
        bad = tmp_path / "a" / "x"
    else:
        bad = tmp_path / ("x" * 300)
    seal = ["--tools", str(FIXTURES / "sealtools.tools.jsonl")]
    seal += ["--queries", str(FIXTURES / "sealtools.queries.jsonl")]
    assert _eval("retrieval", *seal, "--plot", f"{bad}.png") == 2
    plot = capsys.readouterr().err.strip()
    with pytest.raises(SystemExit):
        main(
            [
                "eval",
                "abstain",
                "--queries",
                str(FIXTURES / "abstain.queries.jsonl"),
                "--cache",
                str(bad),
            ]
        )
    cache = capsys.readouterr().err.strip().splitlines()[-1]
    assert main(["eval", "fit-adapter", *SEAL_SET, "--out", f"{bad}.npy", "--quiet"]) == 2
    out = capsys.readouterr().err.strip()
    for err, option in ((plot, "--plot"), (cache, "--cache"), (out, "--out")):
        assert option in err and "cannot be used" in err and "\n" not in err, err


def test_fit_adapter_writes_an_adapter_that_eval_retrieval_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "adapter.npy"
    common = ["--cache", str(tmp_path / "vectors.sqlite")]
    code = main(
        [
            "eval",
            "fit-adapter",
            *BFCL_SET,
            *SEAL_SET,
            "--out",
            str(out),
            "--holdout",
            "--epochs",
            "2",
            "--json",
            *common,
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    held = report["holdout"][0]
    assert held["tools"] == str(FIXTURES / "bfcl.tools.jsonl")
    assert held["queries"] > 0 and {"5", "10"} <= set(held["with"])
    assert out.exists()
    queries = ["--queries", str(FIXTURES / "bfcl.queries.jsonl")]
    tools = ["--tools", str(FIXTURES / "bfcl.tools.jsonl")]
    reports = {}
    for adapter in (str(out), "none"):
        assert (
            main(
                [
                    "eval",
                    "retrieval",
                    *tools,
                    *queries,
                    "--score",
                    "name",
                    "--query-adapter",
                    adapter,
                    "--json",
                    "--quiet",
                    *common,
                ]
            )
            == 0
        )
        reports[adapter] = json.loads(capsys.readouterr().out)
    # (the two cosines of each tool differ, so at least one figure does)
    assert reports[str(out)]["methods"]["dense"] != reports["none"]["methods"]["dense"]
    assert reports[str(out)]["query_adapter"] == QueryAdapter.load(out).id
    assert reports["none"]["query_adapter"] is None


@pytest.mark.slow
def test_eval_retrieval_cross_catalog_prints_both_tables_and_the_json_of_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    root = tmp_path / "bench"
    for name in ("bfcl", "sealtools"):
        (root / name).mkdir(parents=True)
        (root / name / "tools.jsonl").write_bytes((FIXTURES / f"{name}.tools.jsonl").read_bytes())
        queries = (FIXTURES / f"{name}.queries.jsonl").read_bytes()
        (root / name / "queries.dev.jsonl").write_bytes(queries)
    common = ["--bench-root", str(root), "--cache", str(tmp_path / "v.sqlite"), "--quiet"]
    base = ["eval", "retrieval", "--cross-catalog", "--epochs", "1", *common]
    assert main(base) == 0
    text = capsys.readouterr().out
    assert "in-catalog:" in text and "cross-catalog:" in text
    assert text.count("sealtools") >= 3  # (a row in each table and in the gap table)
    assert main([*base, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["in_catalog"]) == set(report["cross_catalog"]) == {"bfcl", "sealtools"}
    assert report["fitted_on"]["bfcl"] == ["sealtools"]


def test_eval_retrieval_cjk_scores_only_the_queries_written_in_cjk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    gold = {"gold_tool_names": ["displayCarStatus"]}
    rows = [
        {"id": "zh", "query": "显示车辆状态 displayCarStatus", **gold},
        {"id": "en", "query": "display the car status", **gold},
    ]
    queries.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    tools = ["--tools", str(FIXTURES / "bfcl.tools.jsonl"), "--score", "name"]
    base = ["eval", "retrieval", *tools, "--no-dense", "--json", "--quiet"]
    assert main([*base, "--queries", str(queries), "--cjk"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["queries"] == 1
    assert report["methods"]["bm25"]["recall@1"] == 1.0
    english = tmp_path / "english.jsonl"
    english.write_text(json.dumps(rows[1]))
    assert main([*base, "--queries", str(english), "--cjk"]) == 2
    assert "Chinese, Japanese or Korean" in capsys.readouterr().err


def test_eval_retrieval_needs_its_files_or_cross_catalog(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["eval", "retrieval", "--quiet"]) == 2
    assert "--cross-catalog" in capsys.readouterr().err
    only = ["--tools", str(FIXTURES / "bfcl.tools.jsonl")]
    assert main(["eval", "retrieval", "--cross-catalog", *only, "--quiet"]) == 2
    assert "no --tools" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"not numpy", b""])
def test_a_query_adapter_that_cannot_be_read_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    """Not one saying to load it unsafely, as numpy's pickle fallback does (nor, for an empty
    file, an EOFError traceback)."""
    broken = tmp_path / "broken.npy"
    broken.write_bytes(content)
    code = main(
        [
            "eval",
            "abstain",
            "--queries",
            str(FIXTURES / "abstain.queries.jsonl"),
            "--query-adapter",
            str(broken),
            "--quiet",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("toolkeeper eval: --query-adapter: cannot read")
    assert "not a .npy file" in err and "pickle" not in err
    assert "\n" not in err


def test_a_query_adapter_of_another_dimension_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np = pytest.importorskip("numpy")
    small = tmp_path / "small.npy"
    QueryAdapter(np.zeros((16, 16))).save(small)
    code = main(
        [
            "eval",
            "abstain",
            "--queries",
            str(FIXTURES / "abstain.queries.jsonl"),
            "--query-adapter",
            str(small),
            "--quiet",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"toolkeeper eval: --query-adapter: {small} maps 16-dimensional vectors; "
        "the model's have 384"
    )


def _fit_adapter(tmp_path: Path, argv: list[str]) -> int:
    """`toolkeeper eval fit-adapter ARGV`, with an embedding cache of this test's own."""
    return main(["eval", "fit-adapter", *argv, "--cache", str(tmp_path / "vectors.sqlite")])


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """What `_fit_adapter` printed to stderr (stripped) when it refused ARGV (exit 2)."""
    assert _fit_adapter(tmp_path, argv) == 2
    return capsys.readouterr().err.strip()


def test_fit_adapter_refuses_a_score_that_is_neither_id_nor_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(
        tmp_path,
        capsys,
        [
            *_set("bfcl", "names"),
            "--out",
            str(tmp_path / "a.npy"),
        ],
    )
    assert "SCORE is id or name, not 'names'" in err


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc, where no file can be made")
def test_fit_adapter_that_cannot_write_its_out_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    err = _refused(
        tmp_path,
        capsys,
        [
            *SEAL_SET,
            "--out",
            "/proc/adapter.npy",
            "--epochs",
            "1",
            "--quiet",
        ],
    )
    assert err.startswith("toolkeeper eval: --out: cannot write /proc/adapter.npy")
    assert "\n" not in err


def test_fit_adapter_refuses_a_set_whose_queries_name_no_tool_of_its_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    sealtools = str(FIXTURES / "sealtools.tools.jsonl")
    bfcl_queries = str(FIXTURES / "bfcl.queries.jsonl")
    err = _refused(
        tmp_path,
        capsys,
        [
            *SEAL_SET,
            *_set("sealtools", "name", bfcl_queries),
            "--out",
            str(tmp_path / "adapter.npy"),
            "--quiet",
        ],
    )
    assert err == (
        f"toolkeeper eval: --set {sealtools} {bfcl_queries}: "
        "no query has a gold tool in its catalog"
    )
    assert not (tmp_path / "adapter.npy").exists()


def test_fit_adapter_holdout_with_too_few_queries_to_halve_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    one = tmp_path / "one.jsonl"
    one.write_text((FIXTURES / "sealtools.queries.jsonl").read_text().splitlines()[0] + "\n")
    err = _refused(
        tmp_path,
        capsys,
        [
            *_set("sealtools", queries=one),
            "--out",
            str(tmp_path / "adapter.npy"),
            "--holdout",
            "--quiet",
        ],
    )
    assert err.startswith("toolkeeper eval: --holdout: too few queries")
    assert "\n" not in err


def test_fit_adapter_with_abstain_requests_prints_the_abstention_model_fitted_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "adapter.npy"
    code = _fit_adapter(
        tmp_path,
        [
            *BFCL_SET,
            "--abstain",
            str(FIXTURES / "abstain.queries.jsonl"),
            "--out",
            str(out),
            "--holdout",
            "--epochs",
            "2",
            "--json",
            "--quiet",
        ],
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["abstention_model"]) == {
        "bias",
        "similarity_weight",
        "coverage_weight",
        "length_weight",
        "foreign_weight",
    }
    assert {"threshold", "f1", "gold_in_top3_answerable"} <= set(
        report["abstention_cross_validated"][0]
    )
    assert QueryAdapter.load(out).dimension == 384


def test_fit_adapter_refuses_abstain_requests_of_one_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answerable = tmp_path / "answerable.jsonl"
    lines = (FIXTURES / "abstain.queries.jsonl").read_text().splitlines()
    answerable.write_text(
        "\n".join(line for line in lines if json.loads(line)["gold_tool_names"]) + "\n"
    )
    err = _refused(
        tmp_path,
        capsys,
        [
            *BFCL_SET,
            "--abstain",
            str(answerable),
            "--out",
            str(tmp_path / "a.npy"),
        ],
    )
    assert "needs answerable requests and others" in err
    assert not (tmp_path / "a.npy").exists()


def test_fit_adapter_refuses_abstain_requests_without_candidate_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toolless = tmp_path / "toolless.jsonl"
    lines = (FIXTURES / "abstain.queries.jsonl").read_text().splitlines()
    toolless.write_text(
        "".join(json.dumps({**json.loads(line), "candidate_tools": []}) + "\n" for line in lines)
    )
    err = _refused(
        tmp_path,
        capsys,
        [
            *BFCL_SET,
            "--abstain",
            str(toolless),
            "--out",
            str(tmp_path / "a.npy"),
            "--quiet",
        ],
    )
    assert err == (
        f"toolkeeper eval: --abstain: {toolless} needs answerable requests and others, "
        "with candidate tools"
    )
    assert not (tmp_path / "a.npy").exists()


@pytest.mark.parametrize("weight", ["-1", "nan", "inf"])
def test_fit_adapter_refuses_an_abstain_weight_that_is_no_weight(
    weight: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(
        tmp_path,
        capsys,
        [
            *BFCL_SET,
            "--abstain",
            str(FIXTURES / "abstain.queries.jsonl"),
            "--abstain-weight",
            weight,
            "--out",
            str(tmp_path / "a.npy"),
            "--quiet",
        ],
    )
    assert err.startswith("toolkeeper eval: --abstain-weight: a weight of 0 or more, not ")
    assert "\n" not in err
    assert not (tmp_path / "a.npy").exists()


def test_eval_safety_prints_each_rate_with_its_counts_as_one_json_object(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["eval", "safety", "--trials", "1", "--kills", "0", "--no-gateway", "--seed", "2"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["trials"] == 1 and report["seed"] == 2 and report["kills"] == 0
    for figures in report["metrics"].values():
        assert set(figures) == {"rate", "numerator", "denominator", "definition"}
        assert 0 <= figures["numerator"] <= figures["denominator"]
    assert main([*args, "--scenario", "unauthorized"]) == 0
    out = capsys.readouterr().out
    assert "unauthorized block rate" in out and "越权阻断率" in out
    assert "scenarios: unauthorized 1" in out


def test_eval_safety_refuses_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "safety", "--scenario", "nope"])
    assert exit_.value.code == 2
