"""Replay the fusion of `eval retrieval --cross-catalog` offline, in seconds, to try changes.

    PYTHONPATH=src python scripts/retrieval_replay.py dump DUMP [--bench-root B] [--metatool N]
    PYTHONPATH=src python scripts/retrieval_replay.py score DUMP

`dump` does the slow part once (about 10 minutes on a busy 2-core machine): it embeds every
query of the three dev sets (MetaTool's first N, default 2500), fits the leave-one-catalog-out
query adapters as `--cross-catalog` does, and stores for each query and each adapter (bundled =
in-catalog, left-out = cross-catalog) the inputs of the fusion: the BM25 hits, the dense hits,
the cosines, the word coverage and each clause's keyword ranking. `score` replays
`fusion.fuse` and `fusion.interleave` over them and prints R@5 / complete@10 per set and
adapter, with the hybrid's margin over the better single method: edit `hybrid` below to try a
change. It reproduces the in-catalog BFCL and Seal-Tools figures exactly (BFCL R@5 .913,
complete@10 .928); cross-catalog ones differ by up to .005, the adapters being fitted on
MetaTool's first N queries only. It reads the selector's private steps (`_search_words`,
`_rank_one`): a development tool, not an API.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolkeeper.eval.metrics import complete_at, recall_at
from toolkeeper.retrieval.fusion import Fused, FusionConfig, fuse, interleave
from toolkeeper.retrieval.selector import _CLAUSE_COVERAGE, _CLAUSE_FIRST_COVERAGE

CONFIG = FusionConfig(abstain_below=None)
FIRST, REST = _CLAUSE_FIRST_COVERAGE, _CLAUSE_COVERAGE  # (the shipped ones: edit to try)


def dump(path: Path, root: Path, metatool: int) -> None:
    import numpy as np

    from toolkeeper.eval.adapter_fit import adapter_set
    from toolkeeper.eval.cross_catalog import _Memo, bench_sets
    from toolkeeper.eval.retrieval import EVALUATOR
    from toolkeeper.retrieval.adapter import bundled_adapter, fit_query_adapter
    from toolkeeper.retrieval.embed import EmbeddingCache, MiniLMEmbedder, default_cache_path
    from toolkeeper.retrieval.selector import Selector
    from toolkeeper.retrieval.text import clauses

    sets = bench_sets(root)
    sets = [replace(s, queries=s.queries[:metatool]) if s.name == "metatool" else s for s in sets]
    embedder, cache = MiniLMEmbedder(query_adapter=False), EmbeddingCache(default_cache_path())
    fits = [
        adapter_set(s.catalog, s.queries, embedder=embedder, cache=cache, score=s.score)
        for s in sets
    ]
    raw = {
        q.text[:512]: v
        for s, f in zip(sets, fits, strict=True)
        for q, v in zip(s.queries, f.data.queries, strict=True)
    }
    out: dict[str, Any] = {}
    for i, s in enumerate(sets):
        cross = fit_query_adapter([f.data for j, f in enumerate(fits) if j != i])
        selector = Selector(embedder=_Memo(embedder, raw, None), cache=cache, config=CONFIG)
        selector.upsert_many(s.catalog.specs)
        allowed = selector.allowed(EVALUATOR)
        vectors = np.stack([raw[q.text[:512]] for q in s.queries])
        adapted = {"in": bundled_adapter().apply(vectors), "cross": cross.apply(vectors)}
        rows = []
        for n, q in enumerate(s.queries):
            text = q.text[:8192]
            kw = selector._search_words(text, 50, allowed, None)
            row: dict[str, Any] = {"gold": q.gold_ids if s.score == "id" else q.gold_names}
            row["kw"] = kw
            for mode, vecs in adapted.items():
                r = selector._rank_one(text, kw, vecs[n], allowed, None, 50)
                sim = {f.name: f.similarity for f in r.fused if f.similarity is not None}
                row[mode] = {"dense": r.dense, "sim": sim, "cov": r.coverage}
            row["clauses"] = []
            for part in clauses(text):
                hits = selector._search_words(part, 50, allowed, None)
                r = selector._rank_one(part, hits, None, allowed, None, 50)
                row["clauses"].append([(f.name, r.coverage[f.name].query) for f in r.fused])
            rows.append(row)
        label = s.catalog.id_of if s.score == "id" else s.catalog.name_of
        out[s.name] = {"rows": rows, "label": dict(label)}
        selector.close()
        sys.stderr.write(f"dumped {s.name}\n")
    with path.open("wb") as file:
        pickle.dump(out, file)


def hybrid(row: dict[str, Any], mode: str) -> list[str]:
    """The hybrid ranking of one query, as `Selector._rank` makes it: change it here."""
    m = row[mode]
    whole = fuse(row["kw"], m["dense"], CONFIG, m["sim"], m["cov"])
    parts = [
        [Fused(name=n, score=0.0) for i, (n, c) in enumerate(r) if c >= (REST if i else FIRST)]
        for r in row["clauses"]
    ]
    hedge = [n for n, _ in m["dense"]] if CONFIG.dense_hedge else []
    return [f.name for f in interleave(whole, parts, hedge)]


def score(path: Path) -> None:
    with path.open("rb") as file:
        data = pickle.load(file)
    for name, s in data.items():
        label, rows = s["label"], s["rows"]
        for mode in ("in", "cross"):
            sums = [0.0] * 4
            for row in rows:
                gold = row["gold"]
                hy = [label[n] for n in hybrid(row, mode)]
                sums[0] += recall_at(hy, gold, 5)
                sums[1] += complete_at(hy, gold, 10)
                sums[2] += recall_at([label[n] for n, _ in row["kw"]], gold, 5)
                sums[3] += recall_at([label[n] for n, _ in row[mode]["dense"]], gold, 5)
            r5, c10, bm25, dense = (x / len(rows) for x in sums)
            sys.stdout.write(
                f"{name:10} {mode:5} hybrid R@5 {r5:.3f} complete@10 {c10:.3f} "
                f"BM25 {bm25:.3f} dense {dense:.3f} margin {r5 - max(bm25, dense):+.3f}\n"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("dump", "score"))
    parser.add_argument("file", type=Path)
    parser.add_argument("--bench-root", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--metatool", type=int, default=2500)
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.file, args.bench_root, args.metatool)
    else:
        score(args.file)


if __name__ == "__main__":
    main()
