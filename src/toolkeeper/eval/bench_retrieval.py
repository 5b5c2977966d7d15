"""`toolkeeper bench retrieval`: latency, index build and context tokens at catalog scale.

What it is: a catalog of N tools — the union of the benchmark pools (`tools.jsonl` under
`../shared/bench/`) plus generated variants (the same tools re-published under other server
namespaces, as a federation of MCP servers would) — and the figures that matter at that
size: per-query latency p50/p99 including the query embedding, cold build (every tool
embedded), warm load (vectors from the on-disk cache), one tool added / removed, and the tokens
of all definitions vs direct top-K vs progressive discovery's initial context. What it is not:
a quality measure (see `toolkeeper eval retrieval`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.values import ToolSpec
from ..retrieval.embed import EmbeddingCache, MiniLMEmbedder
from ..retrieval.meta import meta_specs
from ..retrieval.selector import Selector
from ..retrieval.tokens import count_tokens, tool_definition_json
from .datasets import DatasetError, load_queries, load_tools, unique_names
from .metrics import percentile
from .progress import progress
from .retrieval import EVALUATOR, adapter_id

__all__ = ["bench_root", "build_catalog", "command", "run_bench"]

_POOLS = ("bfcl", "metatool", "sealtools")
_CHANGES = 21
"""Tools added and removed one at a time; the figures are medians."""
_NAMESPACES = ("hub", "crm", "erp", "ops", "lab", "kit", "core", "ext")


def bench_root() -> Path:
    """`shared/bench` or `../shared/bench` above the current folder (else the latter)."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / "shared" / "bench"
        if candidate.is_dir():
            return candidate
        candidate = folder / "../shared/bench"
        if candidate.is_dir():
            return candidate.resolve()
    return Path("../shared/bench")


def build_catalog(root: Path, size: int, *, seed: int = 7) -> list[ToolSpec]:
    """`size` tools: every pool tool, then namespaced variants of randomly drawn ones.

    Raises:
        DatasetError: `root` holds no pool's `tools.jsonl`, or one cannot be read.
    """
    pools = [root / pool / "tools.jsonl" for pool in _POOLS]
    present = [p for p in pools if p.exists()]
    if not present:
        wanted = ", ".join(f"{pool}/tools.jsonl" for pool in _POOLS)
        raise DatasetError(
            f"no benchmark tools under {root} (looked for {wanted}); use --bench-root"
        )
    base = load_tools(present).specs
    rng = random.Random(seed)
    specs = list(base[:size])
    while len(specs) < size:
        spec = rng.choice(base)
        space = rng.choice(_NAMESPACES)
        specs.append(
            replace(
                spec,
                name=f"{space}.{spec.name}",
                description=f"{spec.description} (served by the {space} server)",
            )
        )
    names = unique_names(s.name for s in specs)
    return [replace(s, name=n) if s.name != n else s for s, n in zip(specs, names, strict=True)]


def run_bench(
    *,
    size: int,
    queries_per_set: int = 300,
    k: int = 8,
    root: Path | None = None,
    cache: Path | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Measure one selector over `size` tools; see the module docstring for the figures.

    Raises:
        DatasetError: `root` holds no pool's tools or queries, or a file cannot be read.
    """
    root = root or bench_root()
    specs = build_catalog(root, size)
    rng = random.Random(11)
    texts: list[str] = []
    for pool in _POOLS:
        path = root / pool / "queries.dev.jsonl"
        if path.exists():
            pool_queries = load_queries(path)
            texts.extend(
                q.text for q in rng.sample(pool_queries, min(queries_per_set, len(pool_queries)))
            )
    if not texts:
        wanted = ", ".join(f"{pool}/queries.dev.jsonl" for pool in _POOLS)
        raise DatasetError(
            f"no benchmark queries under {root} (looked for {wanted}); use --bench-root"
        )
    with tempfile.TemporaryDirectory() as tmp:
        cache_path = cache or Path(tmp) / "vectors.sqlite"
        embedder = MiniLMEmbedder()
        started = time.perf_counter()
        cold_cache = EmbeddingCache(cache_path)
        cold = Selector(embedder=embedder, cache=cold_cache)
        cold.upsert_many(specs)
        cold_seconds = time.perf_counter() - started
        embedded = cold_cache.misses
        cold_cache.close()

        started = time.perf_counter()
        warm_cache = EmbeddingCache(cache_path)
        selector = Selector(embedder=MiniLMEmbedder(), cache=warm_cache)
        selector.upsert_many(specs)
        warm_seconds = time.perf_counter() - started

        latencies: list[float] = []
        cpu: list[float] = []
        selected_tokens: list[int] = []
        for text in progress(texts, total=len(texts), label="queries", enabled=show_progress):
            t0, c0 = time.perf_counter(), time.process_time()
            selection = selector.select(text, principal=EVALUATOR, k=k, abstain=False)
            latencies.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            selected_tokens.append(selection.tokens())

        adds: list[float] = []
        removes: list[float] = []
        for n in range(_CHANGES):
            # A new text each time, so every addition embeds (the cache cannot answer).
            extra = replace(
                specs[n],
                name=f"bench.added_tool_{n}",
                description=f"A tool added at run time, number {n}",
            )
            t0 = time.perf_counter()
            selector.upsert(extra)
            adds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            selector.remove(extra.name)
            removes.append(time.perf_counter() - t0)
        selector.close()
        warm_cache.close()
        add_ms = statistics.median(adds) * 1000
        remove_ms = statistics.median(removes) * 1000

    meta_tokens = sum(count_tokens(tool_definition_json(s)) for s in meta_specs())
    return {
        "tools": len(specs),
        "queries": len(texts),
        "k": k,
        "embedder": embedder.model_id,
        "query_adapter": adapter_id(embedder),
        "latency_ms": {
            "p50": percentile(latencies, 50) * 1000,
            "p99": percentile(latencies, 99) * 1000,
            "mean": sum(latencies) / max(len(latencies), 1) * 1000,
        },
        "cpu_ms_per_query": {"p50": percentile(cpu, 50) * 1000, "p99": percentile(cpu, 99) * 1000},
        "load_average_1m": os.getloadavg()[0],
        "cold_build_seconds": cold_seconds,
        "cold_build_embedded": embedded,
        "warm_load_seconds": warm_seconds,
        "add_one_tool_ms": add_ms,
        "remove_one_tool_ms": remove_ms,
        "add_remove_max_ms": max(adds + removes) * 1000,
        "tokens_o200k": {
            "all_schemas": sum(count_tokens(tool_definition_json(s)) for s in specs),
            f"direct_top{k}_mean": sum(selected_tokens) / max(len(selected_tokens), 1),
            "progressive_initial": meta_tokens,
        },
    }


def command(args: argparse.Namespace) -> int:
    """Run the benchmark `args` (parsed by `toolkeeper bench`) asks for; the exit status."""
    try:
        report = run_bench(
            size=args.tools,
            queries_per_set=args.queries,
            k=args.k,
            root=args.bench_root,
            show_progress=not args.quiet,
        )
    except DatasetError as exc:
        sys.stderr.write(f"toolkeeper bench retrieval: {exc}\n")
        return 2
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for key, value in report.items():
            sys.stdout.write(f"{key}: {value}\n")
    return 0
