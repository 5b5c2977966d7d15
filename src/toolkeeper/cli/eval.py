"""`toolkeeper eval`: retrieval and abstention figures on benchmark files, and the safety
rates of fault-injected runs.

`toolkeeper eval retrieval --tools T.jsonl --queries Q.jsonl [--score name|id] [--json]
[--plot out.png]`, `toolkeeper eval abstain --queries Q.jsonl [--json]` and
`toolkeeper eval safety [--trials N] [--seed S] [--kills K] [--json]`; `eval agent` is in
`_eval_agent`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from .._console import count, render_table
from . import _HELP
from ._eval_agent import register_agent
from ._eval_safety import safety as run_safety

__all__ = ["register"]

# `toolkeeper.retrieval.adapter`'s defaults, here so that `--help` need not import retrieval (a
# test checks they agree)
ABSTAIN_WEIGHT = 5.0
EPOCHS = 20

SCENARIO_NAMES = (
    "retryable_errors",
    "timeouts",
    "upstream_dying",
    "duplicate_proposals",
    "unauthorized",
    "tampered_approvals",
)
"""The in-process scenarios of `eval safety` (`toolkeeper.eval.scenarios.SCENARIOS`), named
here so that the parser is built without importing the keeper."""


def register(subparsers: Any) -> None:
    """Add `eval retrieval`, `abstain`, `fit-adapter`, `safety` and `agent`."""
    parser = subparsers.add_parser(
        "eval",
        help=_HELP["eval"],
    )
    sub = parser.add_subparsers(dest="eval_command", metavar="WHAT", required=True)

    retrieval = sub.add_parser(
        "retrieval",
        help="Recall@k, nDCG, MRR, latency, tokens",
        description="Score one catalog (--tools, --queries), or with --cross-catalog the "
        "three dev sets under the bench folder, each in-catalog (the adapter as shipped) and "
        "cross-catalog (an adapter fitted on the other sets only).",
    )
    retrieval.add_argument("--tools", nargs="+", help="tools.jsonl file(s)")
    retrieval.add_argument("--queries", help="queries.jsonl file")
    retrieval.add_argument(
        "--cross-catalog",
        action="store_true",
        help="score bfcl, metatool and sealtools under --bench-root in-catalog and with an "
        "adapter fitted on the other two (leave one catalog out); prints both tables",
    )
    retrieval.add_argument(
        "--bench-root",
        type=Path,
        help="the folder holding bfcl/, metatool/, sealtools/ (default: shared/bench or "
        "../shared/bench above the current folder)",
    )
    retrieval.add_argument(
        "--epochs",
        type=count(1),
        default=EPOCHS,
        help=f"passes of each leave-one-out adapter fit (default {EPOCHS})",
    )
    retrieval.add_argument(
        "--score",
        choices=("id", "name"),
        default="id",
        help="match retrieved tools to gold ones by dataset id or by name (default: id)",
    )
    retrieval.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write a PNG of recall@k per method to this file (.png is added if it has no "
        "suffix; its folder must exist)",
    )
    retrieval.add_argument("--limit", type=count(1), help="evaluate only the first N queries")
    retrieval.add_argument(
        "--cjk",
        action="store_true",
        help="score only the queries written (partly) in Chinese, Japanese or Korean: the "
        "CJK check set of a dev set",
    )
    _common(retrieval)
    retrieval.set_defaults(func=_retrieval)

    abstain = sub.add_parser("abstain", help="abstention precision, recall and F1")
    abstain.add_argument("--queries", required=True, help="queries with candidate_tools")
    abstain.add_argument("--limit", type=count(1), help="evaluate only the first N queries")
    _common(abstain)
    abstain.set_defaults(func=_abstain)

    fit = sub.add_parser(
        "fit-adapter",
        help="fit the query adapter of the dense ranking on catalogs and their queries",
        description="Fit the matrix that maps query vectors towards their tools' vectors "
        "(the bundled one was fitted this way on the three retrieval dev sets, and with "
        "--abstain on the abstention one) and write it as .npy; use it with "
        "MiniLMEmbedder(query_adapter=QueryAdapter.load(FILE)) or "
        "`eval retrieval --query-adapter FILE`.",
    )
    fit.add_argument(
        "--set",
        dest="sets",
        nargs=3,
        action="append",
        required=True,
        metavar=("TOOLS", "QUERIES", "SCORE"),
        help="a tools.jsonl, its queries.jsonl, and id or name (how gold tools are named); "
        "repeat for more catalogs, each weighs the same",
    )
    fit.add_argument("--out", required=True, help="the .npy file to write")
    fit.add_argument(
        "--holdout",
        action="store_true",
        help="first fit on a random half of every set's queries and print the dense "
        "Recall@5/10 of the other half with and without that adapter",
    )
    fit.add_argument(
        "--abstain",
        metavar="QUERIES",
        help="requests with candidate_tools of their own, some answered by none (the "
        "bfcl-abstain format): the adapter also learns to keep the cosines of those low, and "
        "the abstention model is fitted anew for it (its weights and cross-validated "
        "figures are printed)",
    )
    fit.add_argument(
        "--abstain-weight",
        type=float,
        default=ABSTAIN_WEIGHT,
        help=f"weight of the abstention loss against one set's (default {ABSTAIN_WEIGHT:g})",
    )
    fit.add_argument(
        "--epochs",
        type=count(1),
        default=EPOCHS,
        help=f"passes over the data (default {EPOCHS})",
    )
    fit.add_argument("--json", action="store_true", help="print the JSON report")
    fit.add_argument("--quiet", action="store_true", help="no progress lines")
    _cache_option(fit, "embedding cache file (as for `eval retrieval`)")
    fit.set_defaults(func=_fit_adapter)

    safety = sub.add_parser(
        "safety",
        help="duplicate side effects, approval bypasses, blocked and refused calls, unknown "
        "outcomes reconciled, timeouts and retries, under injected faults",
        description="Run fault-injected scenarios against a real Keeper (a SQLite ledger in a "
        "temporary folder) and, with the mcp extra, its gateway's tools/call: tools that "
        "fail transiently, time out, lose their response, lose their connection mid-call; "
        "processes killed mid-call; duplicate and concurrent proposals; unauthorized "
        "proposals; arguments tampered with after approval. Offline; a few seconds.",
    )
    safety.add_argument(
        "--trials", type=count(1), default=5, help="runs of each scenario (default 5)"
    )
    safety.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    safety.add_argument(
        "--kills",
        type=count(0),
        default=1,
        help="processes killed mid-call, each a Python process of its own (default 1)",
    )
    safety.add_argument(
        "--no-gateway", action="store_true", help="leave the gateway's tools/call out"
    )
    safety.add_argument(
        "--controls",
        action="store_true",
        help="also run under a deliberately unsafe configuration, to see each rate notice it",
    )
    safety.add_argument(
        "--scenario",
        dest="scenarios",
        action="append",
        choices=sorted(SCENARIO_NAMES),
        help="run only this in-process scenario (repeat for more; default: all)",
    )
    safety.add_argument("--json", action="store_true", help="print the JSON report")
    safety.set_defaults(func=run_safety)
    register_agent(sub)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--no-dense", action="store_true", help="keyword search only")
    _cache_option(
        parser,
        "embedding cache file, made if missing in a folder that must exist (default: "
        "$TOOLKEEPER_CACHE/embeddings.sqlite, else ~/.cache/toolkeeper/embeddings.sqlite)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--query-adapter",
        default="bundled",
        metavar="bundled|none|FILE",
        help="the adapter of query vectors: the bundled one (default), none, or a .npy file "
        "written by `eval fit-adapter`",
    )


def _cache_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--cache", type=_cache_file, metavar="FILE", help=help)


def _cache_file(text: str) -> Path:
    """A usage error for a cache path that is a folder, or in one that does not exist: a
    mistyped path must not leave folders behind (as --plot, the folder is not made)."""
    from ..core._paths import file_problem

    problem = file_problem(text, "name the cache file in it")
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def _dense(args: argparse.Namespace) -> dict[str, Any]:
    if args.no_dense:
        return {"embedder": None, "cache": None}
    from ..retrieval.embed import EmbeddingCache, MiniLMEmbedder, default_cache_path

    cache = EmbeddingCache(args.cache or default_cache_path())
    return {"embedder": MiniLMEmbedder(query_adapter=args.adapter), "cache": cache}


def _query_adapter(text: str) -> Any:
    """`--query-adapter`: True (bundled), False (none), or the adapter in a file; or why
    it cannot be read."""
    if text == "bundled":
        return True
    if text == "none":
        return False
    from ..retrieval.adapter import QueryAdapter
    from ..retrieval.embed import MiniLMEmbedder

    try:
        adapter = QueryAdapter.load(text)
    except (OSError, ValueError) as exc:
        return f"--query-adapter: cannot read {text}: {exc}"
    if adapter.dimension != MiniLMEmbedder.dimension:
        return (
            f"--query-adapter: {text} maps {adapter.dimension}-dimensional vectors; "
            f"the model's have {MiniLMEmbedder.dimension}"
        )
    return adapter


def _fail(message: str) -> int:
    print(f"toolkeeper eval: {message}", file=sys.stderr)
    return 2


def _retrieval(args: argparse.Namespace) -> int:
    from ..eval.datasets import DatasetError, load_queries, load_tools
    from ..eval.retrieval import evaluate_retrieval

    args.adapter = _query_adapter(args.query_adapter)
    if isinstance(args.adapter, str):
        return _fail(args.adapter)
    if args.cross_catalog:
        return _cross_catalog(args)
    if not args.tools or not args.queries:
        return _fail("retrieval: give --tools and --queries, or --cross-catalog")
    if args.plot:
        # Checked before the run, so that a long evaluation never ends in a lost report.
        try:
            from ..eval.plot import plot_recall
            from ..retrieval._deps import require

            require("matplotlib")
        except ImportError as exc:
            return _fail(f"--plot: {exc}")
        plot = _plot_file(args.plot)
        if isinstance(plot, str):
            return _fail(f"--plot: {plot}")
    try:
        catalog = load_tools(args.tools)
        queries = load_queries(args.queries)
    except DatasetError as exc:
        return _fail(str(exc))
    if args.cjk:
        from ..retrieval.text import has_cjk

        queries = [q for q in queries if has_cjk(q.text)]
        if not queries:
            return _fail(f"no query in {args.queries} is written in Chinese, Japanese or Korean")
    queries = queries[: args.limit]
    unscored = _unscorable(catalog, queries, args)
    if unscored:
        return _fail(unscored)
    report = evaluate_retrieval(
        catalog, queries, **_dense(args), score=args.score, show_progress=not args.quiet
    )
    failed = None
    if args.plot:
        try:
            plot_recall(report, plot, title=Path(args.queries).parent.name)
            report["plot"] = str(plot)
        except (OSError, ValueError) as exc:
            failed = f"--plot: cannot write {plot}: {exc}"
    _emit(report, args.json)
    return _fail(failed) if failed else 0


def _cross_catalog(args: argparse.Namespace) -> int:
    from ..eval.bench_retrieval import bench_root
    from ..eval.cross_catalog import bench_sets, evaluate_cross_catalog
    from ..eval.datasets import DatasetError
    from ..retrieval.embed import EmbeddingCache, MiniLMEmbedder, default_cache_path

    if args.tools or args.queries or args.plot or args.no_dense or args.cjk:
        return _fail(
            "--cross-catalog scores the dev sets of --bench-root: no --tools, "
            "--queries, --plot, --no-dense or --cjk"
        )
    if args.adapter is False:
        return _fail("--cross-catalog compares adapters: --query-adapter none leaves none")
    try:
        sets = bench_sets(args.bench_root or bench_root(), limit=args.limit)
    except DatasetError as exc:
        return _fail(str(exc))

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    cache = EmbeddingCache(args.cache or default_cache_path())
    try:
        report = evaluate_cross_catalog(
            sets,
            embedder=MiniLMEmbedder(query_adapter=False),
            cache=cache,
            in_catalog_adapter=args.adapter if args.adapter is not True else None,
            epochs=args.epochs,
            show_progress=not args.quiet,
            say=say,
        )
    finally:
        cache.close()
    if args.json:
        _emit(report, True)
        return 0
    for title, key in (("in-catalog", "in_catalog"), ("cross-catalog", "cross_catalog")):
        print(f"{title}:")
        print(_methods_table(report[key]))
        print()
    rows = []
    for name, inside in report["in_catalog"].items():
        outside = report["cross_catalog"][name]
        rows.append(
            [name, ", ".join(report["fitted_on"][name])]
            + [
                f"{outside['methods'][m]['recall@5'] - inside['methods'][m]['recall@5']:+.3f}"
                for m in ("bm25", "dense", "hybrid")
            ]
        )
    print("cross-catalog minus in-catalog, R@5:")
    print(render_table(["set", "adapter fitted on", "bm25", "dense", "hybrid"], rows))
    return 0


def _methods_table(reports: dict[str, Any]) -> str:
    """One row per set: R@5 of each method, then the hybrid's R@10, complete@10 and the p50
    of ranking a query (its vector made beforehand: `toolkeeper bench retrieval` times both)."""
    rows = []
    for name, report in reports.items():
        methods = report["methods"]
        hybrid = methods["hybrid"]
        best = max(methods[m]["recall@5"] for m in ("bm25", "dense"))
        rows.append(
            [
                name,
                report["queries"],
                *(f"{methods[m]['recall@5']:.3f}" for m in ("bm25", "dense", "hybrid")),
                f"{hybrid['recall@5'] - best:+.3f}",
                f"{hybrid['recall@10']:.3f}",
                f"{hybrid['complete@10']:.3f}",
                f"{report['latency_ms']['p50']:.1f}",
            ]
        )
    headers = [
        "set",
        "queries",
        "bm25 R@5",
        "dense R@5",
        "hybrid R@5",
        "vs best",
        "hybrid R@10",
        "complete@10",
        "rank p50 ms",
    ]
    return render_table(headers, rows)


def _plot_file(text: str) -> Path | str:
    """The PNG file `--plot` names (`.png` added when it has no suffix), or why it cannot be
    written."""
    path = Path(text)
    if path.suffix and path.suffix.lower() != ".png":
        return f"{text}: the plot is a PNG, name a .png file"
    from ..core._paths import file_problem

    problem = file_problem(text, f"name the PNG file, e.g. {path / 'recall.png'}")
    if problem is not None:
        return problem
    return path if path.suffix else path.with_suffix(".png")


def _unscorable(catalog: Any, queries: Any, args: argparse.Namespace) -> str | None:
    """Why these files cannot be scored together, if they cannot: a report of zeros would
    look like a result."""
    if not catalog.specs:
        return f"no tools in {' '.join(args.tools)}"
    if not queries:
        return f"no queries in {args.queries}"
    if args.score == "name":
        known, field = set(catalog.name_of.values()), "gold_tool_names"
        gold = [set(q.gold_names) for q in queries]
    else:
        known, field = set(catalog.id_of.values()), "gold_tool_ids"
        gold = [set(q.gold_ids) for q in queries]
    if not any(gold):
        return f"no query in {args.queries} has {field} (--score {args.score})"
    if not any(g & known for g in gold):
        return (
            f"no gold tool of {args.queries} is in the tools given: do the files belong together?"
        )
    # A gold tool the catalog lacks can never be retrieved: counted as a miss, it lowers
    # every figure as if the ranking had failed.
    lacking = [(q, sorted(g - known)) for q, g in zip(queries, gold, strict=True) if g - known]
    if lacking:
        query, missing = lacking[0]
        return (
            f"{len(lacking)} of {len(queries)} queries in {args.queries} name gold tools that "
            f"are not in the tools given (the first: query {query.id!r}, {missing[0]!r}); "
            "give every tool the queries name"
        )
    return None


def _abstain(args: argparse.Namespace) -> int:
    from ..eval.datasets import DatasetError, load_abstain_queries
    from ..eval.retrieval import evaluate_abstention

    args.adapter = _query_adapter(args.query_adapter)
    if isinstance(args.adapter, str):
        return _fail(args.adapter)
    try:
        queries = load_abstain_queries(args.queries)[: args.limit]
    except DatasetError as exc:
        return _fail(str(exc))
    if not queries:  # (a report of zeros would look like a result)
        return _fail(f"no queries in {args.queries}")
    report = evaluate_abstention(queries, **_dense(args), show_progress=not args.quiet)
    _emit(report, args.json)
    return 0


def _fit_adapter(args: argparse.Namespace) -> int:
    from ..eval.adapter_fit import (
        abstain_set,
        adapter_set,
        cross_fitted_abstention,
        dense_recall,
        split,
    )
    from ..eval.datasets import DatasetError, load_abstain_queries, load_queries, load_tools
    from ..retrieval.adapter import fit_query_adapter
    from ..retrieval.embed import EmbeddingCache, MiniLMEmbedder, default_cache_path

    out = Path(args.out)
    from ..core._paths import file_problem

    problem = file_problem(args.out, "name the .npy file to write in it")
    if problem is not None:
        return _fail(f"--out: {problem}")
    bad = [score for _, _, score in args.sets if score not in ("id", "name")]
    if bad:
        return _fail(f"--set: SCORE is id or name, not {bad[0]!r}")
    if not 0 <= args.abstain_weight < float("inf"):  # (NaN is neither)
        return _fail(f"--abstain-weight: a weight of 0 or more, not {args.abstain_weight}")
    try:
        loaded = [
            (tools, load_tools(tools), load_queries(queries), score)
            for tools, queries, score in args.sets
        ]
        abstaining = load_abstain_queries(args.abstain) if args.abstain else []
    except DatasetError as exc:
        return _fail(str(exc))
    # (a request without candidate tools teaches nothing: it is abstained from whatever it says)
    if args.abstain and len({q.answerable for q in abstaining if q.tools}) < 2:
        return _fail(
            f"--abstain: {args.abstain} needs answerable requests and others, with candidate tools"
        )
    embedder = MiniLMEmbedder(query_adapter=False)
    cache = EmbeddingCache(args.cache or default_cache_path())
    fits = []
    for tools, catalog, queries, score in loaded:
        if not args.quiet:
            print(
                f"embedding {tools}: {len(catalog.specs)} tools, {len(queries)} queries",
                file=sys.stderr,
            )
        fits.append(adapter_set(catalog, queries, embedder=embedder, cache=cache, score=score))
    for (tools, queries, _), fit in zip(args.sets, fits, strict=True):
        # A set with none would add nothing to the fit and zeros to the holdout report.
        if not any(fit.data.positives):
            return _fail(f"--set {tools} {queries}: no query has a gold tool in its catalog")
    report: dict[str, Any] = {"sets": [tools for tools, *_ in loaded], "out": str(out)}
    requests = abstain_set(abstaining, embedder=embedder, cache=cache) if abstaining else None
    if args.holdout:
        parts = [split(f) for f in fits]
        if not any(p for a, _ in parts for p in a.data.positives):
            return _fail(
                "--holdout: too few queries: none of the half to fit on has a gold tool "
                "in its catalog"
            )
        # (requests that a held-out half also holds are left out of the fit)
        held_texts = {t for _, b in parts for t in b.texts}
        taught = [i for i, q in enumerate(abstaining) if q.text not in held_texts]
        adapter = fit_query_adapter(
            [a.data for a, _ in parts],
            abstain=requests.subset(taught) if requests is not None and taught else None,
            abstain_weight=args.abstain_weight,
            epochs=args.epochs,
        )
        report["holdout"] = [
            {
                "tools": tools,
                "queries": len(b.gold),
                "without": dense_recall(b, None),
                "with": dense_recall(b, adapter),
            }
            for (tools, *_), (_, b) in zip(loaded, parts, strict=True)
        ]
    fitted = fit_query_adapter(
        [f.data for f in fits],
        abstain=requests,
        abstain_weight=args.abstain_weight,
        epochs=args.epochs,
    )
    try:
        fitted.save(out)
    except OSError as exc:
        return _fail(f"--out: cannot write {args.out}: {exc.strerror or exc}")
    if abstaining:
        if not args.quiet:
            print(
                "fitting the abstention model on requests each adapter never saw", file=sys.stderr
            )
        try:
            model, sweep = cross_fitted_abstention(
                fits,
                abstaining,
                embedder=embedder,
                cache=cache,
                abstain_weight=args.abstain_weight,
                epochs=args.epochs,
            )
        except ValueError as exc:
            return _fail(f"--abstain: {exc}")
        report["abstention_model"] = dataclasses.asdict(model)
        report["abstention_cross_validated"] = sweep
    _emit(report, args.json)
    return 0


def _emit(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    for key, value in report.items():
        if key == "methods":
            for method, figures in value.items():
                shown = {k: round(v, 3) for k, v in figures.items() if k != "curve"}
                print(f"{method:>8}: {shown}")
        else:
            print(f"{key}: {value}")
