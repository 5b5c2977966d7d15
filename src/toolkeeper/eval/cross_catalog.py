"""What carries over: retrieval scored on catalogs the fitted parts never saw.

What it is: `evaluate_cross_catalog` scores each benchmark set twice — in-catalog, with the
query adapter as shipped (fitted on every dev set), and cross-catalog, with an adapter fitted
on all the other sets only (leave one catalog out) — so the gap between the two is what a
catalog of one's own can expect to lose. Every query is embedded once; each adapter then maps
the same raw vectors. `bench_sets` finds the three retrieval dev sets. What it is not: a
command line (see `toolkeeper.cli.eval`) or the adapter's fit (see
`toolkeeper.retrieval.adapter`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..retrieval._deps import require
from ..retrieval.adapter import EPOCHS, QueryAdapter, bundled_adapter, fit_query_adapter
from ..retrieval.embed import Embedder, EmbeddingCache
from ..retrieval.fusion import FusionConfig
from .adapter_fit import FitData, adapter_set
from .datasets import Catalog, DatasetError, Query, load_queries, load_tools
from .retrieval import evaluate_retrieval

__all__ = ["BENCH_SETS", "BenchSet", "bench_sets", "evaluate_cross_catalog"]

BENCH_SETS = (("bfcl", "name"), ("metatool", "id"), ("sealtools", "id"))
"""The retrieval dev sets under a bench folder, with how each is scored (BFCL reuses names)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchSet:
    """One catalog with its queries, as `eval retrieval` scores it."""

    name: str
    """What the reports call it (the folder's name)."""
    catalog: Catalog
    """The tools."""
    queries: Sequence[Query]
    """The requests with their gold tools."""
    score: str = "id"
    """`id` or `name`: how a retrieved tool is matched to a gold one."""


def bench_sets(root: Path, *, limit: int | None = None) -> list[BenchSet]:
    """The retrieval dev sets under `root` (those of `BENCH_SETS` it holds), each with its
    first `limit` queries.

    Raises:
        DatasetError: `root` holds fewer than two sets, or a set's files cannot be read.
    """
    out = []
    for name, score in BENCH_SETS:
        folder = root / name
        tools, queries = folder / "tools.jsonl", folder / "queries.dev.jsonl"
        if not tools.is_file() or not queries.is_file():
            continue
        out.append(
            BenchSet(
                name=name,
                catalog=load_tools(tools),
                queries=load_queries(queries)[:limit],
                score=score,
            )
        )
    if len(out) < 2:
        wanted = ", ".join(f"{name}/" for name, _ in BENCH_SETS)
        raise DatasetError(
            f"{root}: cross-catalog figures need two of {wanted} with tools.jsonl and "
            "queries.dev.jsonl (use --bench-root)"
        )
    return out


class _Memo:
    """An embedder whose query vectors were made once, mapped by one adapter or another."""

    def __init__(
        self, embedder: Embedder, raw: dict[str, Any], adapter: QueryAdapter | None
    ) -> None:
        self._embedder = embedder
        self._raw = raw
        self.query_adapter = adapter
        self.model_id = embedder.model_id
        self.dimension = embedder.dimension

    def embed(self, texts: Sequence[str]) -> Any:
        return self._embedder.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        np: Any = require("numpy")
        missing = [t for t in texts if t not in self._raw]
        if missing:
            for text, vector in zip(missing, self._embedder.embed(missing), strict=True):
                self._raw[text] = vector
        vectors = np.stack([self._raw[t] for t in texts])
        return vectors if self.query_adapter is None else self.query_adapter.apply(vectors)


def evaluate_cross_catalog(
    sets: Sequence[BenchSet],
    *,
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    config: FusionConfig | None = None,
    in_catalog_adapter: QueryAdapter | None = None,
    epochs: int = EPOCHS,
    show_progress: bool = True,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Score every set in-catalog and cross-catalog (leave one catalog out).

    Args:
        sets: Two or more catalogs with their queries.
        embedder: Embeds without an adapter (`MiniLMEmbedder(query_adapter=False)`).
        cache: Tool vectors kept across runs.
        config: The one fusion configuration every set is scored with.
        in_catalog_adapter: The adapter of the in-catalog figures (default: the bundled
            one, fitted on the three dev sets and the abstention one).
        epochs: Passes of each leave-one-out fit.
        show_progress: Progress bars on stderr.
        say: Where to report each step (a line of text).

    Returns:
        `in_catalog` and `cross_catalog`: per set, the report of `evaluate_retrieval` (without
        the tokens and exposure figures), and `fitted_on`: per set, the sets its
        cross-catalog adapter was fitted on.

    Raises:
        ValueError: fewer than two sets, or a left-out set's others have no gold tool.
    """
    if len(sets) < 2:
        raise ValueError("cross-catalog figures need two sets or more")
    in_catalog_adapter = in_catalog_adapter or bundled_adapter()
    cut = (config or FusionConfig()).query_chars
    fits: list[FitData] = []
    raw: dict[str, Any] = {}
    for s in sets:
        say(f"embedding {s.name}: {len(s.catalog.specs)} tools, {len(s.queries)} queries")
        fit = adapter_set(s.catalog, s.queries, embedder=embedder, cache=cache, score=s.score)
        fits.append(fit)
        for query, vector in zip(s.queries, fit.data.queries, strict=True):
            raw[query.text[:cut]] = vector

    def score(s: BenchSet, adapter: QueryAdapter | None) -> dict[str, Any]:
        return evaluate_retrieval(
            s.catalog,
            s.queries,
            embedder=_Memo(embedder, raw, adapter),
            cache=cache,
            score=s.score,
            config=config,
            show_progress=show_progress,
            details=False,
        )

    report: dict[str, Any] = {"in_catalog": {}, "cross_catalog": {}, "fitted_on": {}}
    for s in sets:
        say(f"in-catalog: {s.name}")
        report["in_catalog"][s.name] = score(s, in_catalog_adapter)
    for i, s in enumerate(sets):
        others = [f.data for j, f in enumerate(fits) if j != i]
        names = [o.name for j, o in enumerate(sets) if j != i]
        say(f"cross-catalog: fitting the adapter on {', '.join(names)}; scoring {s.name}")
        adapter = fit_query_adapter(others, epochs=epochs)
        report["fitted_on"][s.name] = names
        report["cross_catalog"][s.name] = score(s, adapter)
    return report
