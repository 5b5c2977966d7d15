"""`toolkeeper eval`: retrieval and abstention figures on benchmark files.

`toolkeeper eval retrieval --tools T.jsonl --queries Q.jsonl [--score name|id] [--json]
[--plot out.png]` and `toolkeeper eval abstain --queries Q.jsonl [--json]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._common import count

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add `eval retrieval` and `eval abstain`."""
    parser = subparsers.add_parser("eval", help="measure retrieval on benchmark files")
    sub = parser.add_subparsers(dest="eval_command", metavar="WHAT", required=True)

    retrieval = sub.add_parser("retrieval", help="Recall@k, nDCG, MRR, latency, tokens")
    retrieval.add_argument("--tools", required=True, nargs="+", help="tools.jsonl file(s)")
    retrieval.add_argument("--queries", required=True, help="queries.jsonl file")
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
    _common(retrieval)
    retrieval.set_defaults(func=_retrieval)

    abstain = sub.add_parser("abstain", help="abstention precision, recall and F1")
    abstain.add_argument("--queries", required=True, help="queries with candidate_tools")
    abstain.add_argument("--limit", type=count(1), help="evaluate only the first N queries")
    _common(abstain)
    abstain.set_defaults(func=_abstain)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--no-dense", action="store_true", help="keyword search only")
    parser.add_argument(
        "--cache",
        type=_cache_file,
        metavar="FILE",
        help="embedding cache file, made if missing in a folder that must exist (default: "
        "$TOOLKEEPER_CACHE/embeddings.sqlite, else ~/.cache/toolkeeper/embeddings.sqlite)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _cache_file(text: str) -> Path:
    """A usage error for a cache path that is a folder, or in one that does not exist: a
    mistyped path must not leave folders behind (as --plot, the folder is not made)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: name the cache file in it")
    if not path.resolve().parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder of {text} does not exist")
    return path


def _dense(args: argparse.Namespace) -> dict[str, Any]:
    if args.no_dense:
        return {"embedder": None, "cache": None}
    from ..retrieval.embed import EmbeddingCache, MiniLMEmbedder, default_cache_path

    cache = EmbeddingCache(args.cache or default_cache_path())
    return {"embedder": MiniLMEmbedder(), "cache": cache}


def _fail(message: str) -> int:
    print(f"toolkeeper eval: {message}", file=sys.stderr)
    return 2


def _retrieval(args: argparse.Namespace) -> int:
    from ..eval.datasets import DatasetError, load_queries, load_tools
    from ..eval.retrieval import evaluate_retrieval

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
        queries = load_queries(args.queries)[: args.limit]
    except DatasetError as exc:
        return _fail(str(exc))
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


def _plot_file(text: str) -> Path | str:
    """The PNG file `--plot` names (`.png` added when it has no suffix), or why it cannot be
    written."""
    path = Path(text)
    if path.is_dir():
        return f"{text} is a folder: name the PNG file, e.g. {path / 'recall.png'}"
    if not path.suffix:
        path = path.with_suffix(".png")
    elif path.suffix.lower() != ".png":
        return f"{text}: the plot is a PNG, name a .png file"
    if not path.resolve().parent.is_dir():
        return f"the folder of {text} does not exist"
    return path


def _unscorable(catalog: Any, queries: Any, args: argparse.Namespace) -> str | None:
    """Why these files cannot be scored together, if they cannot: a report of zeros would
    look like a result."""
    if not catalog.specs:
        return f"no tools in {' '.join(args.tools)}"
    if args.score == "name":
        known, field = set(catalog.name_of.values()), "gold_tool_names"
        gold = [set(q.gold_names) for q in queries]
    else:
        known, field = set(catalog.id_of.values()), "gold_tool_ids"
        gold = [set(q.gold_ids) for q in queries]
    if queries and not any(gold):
        return f"no query in {args.queries} has {field} (--score {args.score})"
    if queries and not any(g & known for g in gold):
        return (
            f"no gold tool of {args.queries} is in the tools given: do the files belong together?"
        )
    return None


def _abstain(args: argparse.Namespace) -> int:
    from ..eval.datasets import DatasetError, load_abstain_queries
    from ..eval.retrieval import evaluate_abstention

    try:
        queries = load_abstain_queries(args.queries)[: args.limit]
    except DatasetError as exc:
        return _fail(str(exc))
    report = evaluate_abstention(queries, **_dense(args), show_progress=not args.quiet)
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
