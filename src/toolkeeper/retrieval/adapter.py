"""A learned linear map on query vectors: the query side of the dense ranking, fitted to tools.

What it is: `QueryAdapter` multiplies a query's embedding by a square matrix `I + delta` and
normalizes it again before it is compared with tool vectors, which stay as the embedder made
them (so cached tool vectors stay valid). `fit_query_adapter` fits `delta` (numpy only) by a
softmax over every tool of a catalog: each query's gold tools against all the others, with an
L2 pull towards the identity. What it is not: an embedder of its own (see `embed`), or a
ranker (see `fusion`).

The bundled matrix (`minilm_query_adapter.npy`, float16, 295 KB) is for the bundled MiniLM
embedder. It was written by::

    toolkeeper eval fit-adapter --out minilm_query_adapter.npy \
        --set bench/bfcl/tools.jsonl bench/bfcl/queries.dev.jsonl name \
        --set bench/metatool/tools.jsonl bench/metatool/queries.dev.jsonl id \
        --set bench/sealtools/tools.jsonl bench/sealtools/queries.dev.jsonl id

Fitted on a random half of each set's queries and scored on the other half (`--holdout`),
dense Recall@5 / @10 goes from .759 / .836 to .871 / .915 on BFCL (by name), from .760 / .825
to .892 / .928 on MetaTool, and stays at .584 / .671 on Seal-Tools. Fitted on two of the sets
and scored on the third, whose tools it never saw, it changes Recall@5 by +.004 (BFCL), +.030
(MetaTool) and +.007 (Seal-Tools): it helps most where the catalog and its requests resemble
what it was fitted on, and `eval fit-adapter` fits one on a catalog of your own.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._deps import require

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = ["AdapterSet", "QueryAdapter", "bundled_adapter", "fit_query_adapter"]

BUNDLED = "minilm_query_adapter.npy"
"""The file, in this package, of the adapter fitted for the bundled MiniLM embedder."""


class QueryAdapter:
    """Maps unit query vectors into the space where their tools lie nearest.

    Args:
        delta: `W - I`, a square matrix of the embedder's dimension.

    Raises:
        ValueError: `delta` is not a square matrix of finite numbers.
    """

    def __init__(self, delta: Any) -> None:
        np: Any = require("numpy")
        delta = np.asarray(delta, dtype=np.float32)
        if delta.ndim != 2 or delta.shape[0] != delta.shape[1]:
            raise ValueError(f"a query adapter is a square matrix, not of shape {delta.shape}")
        if not np.isfinite(delta).all():
            # NaN or infinity would make every mapped query NaN: the dense ranking lost unseen.
            raise ValueError("a query adapter's entries are finite numbers, not NaN or infinity")
        self._np = np
        # Applied as `q @ W.T` to rows of queries.
        self._weights_t: Any = (np.eye(delta.shape[0], dtype=np.float32) + delta).T.copy()
        self.dimension = int(delta.shape[0])
        # `save` writes these entries and `id` digests them: a saved file loads with this id.
        self._saved = delta.astype(np.float16)
        digest = hashlib.sha256(self._saved.tobytes()).hexdigest()[:12]
        self.id = f"query-adapter-{self.dimension}-{digest}"

    @classmethod
    def load(cls, path: str | Path) -> QueryAdapter:
        """Read an adapter saved by `save` (a `.npy` file of `delta`)."""
        np: Any = require("numpy")
        return cls(np.load(Path(path), allow_pickle=False))

    def save(self, path: str | Path) -> None:
        """Write `delta` as float16 `.npy` (its entries are small: float16 keeps them)."""
        self._np.save(Path(path), self._saved, allow_pickle=False)

    def apply(self, queries: Matrix) -> Matrix:
        """The adapted, L2-normalized rows of `queries`."""
        np = self._np
        mapped = np.asarray(queries, dtype=np.float32) @ self._weights_t
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        return mapped / np.clip(norms, 1e-12, None)  # type: ignore[no-any-return]


@functools.cache
def bundled_adapter() -> QueryAdapter:
    """The adapter fitted for the bundled MiniLM embedder (see the module docstring); read
    once per process (it is never changed in place)."""
    with resources.as_file(resources.files(__package__).joinpath(BUNDLED)) as path:
        return QueryAdapter.load(path)


@dataclass(frozen=True, kw_only=True, slots=True)
class AdapterSet:
    """One catalog's training data: query vectors, tool vectors, and each query's gold rows."""

    queries: Any
    """(n, d) unit query vectors."""
    tools: Any
    """(m, d) unit tool vectors, as the embedder made them."""
    positives: Sequence[Sequence[int]]
    """For each query, the rows of `tools` that answer it (a query with none is skipped)."""


def fit_query_adapter(
    sets: Sequence[AdapterSet],
    *,
    l2: float = 1e-2,
    temperature: float = 0.05,
    epochs: int = 10,
    learning_rate: float = 1e-3,
    batch: int = 256,
    seed: int = 0,
) -> QueryAdapter:
    """Fit `delta` by Adam on the mean over sets of each set's mean softmax loss.

    A query's loss is `logsumexp(s) - logsumexp(s[gold])` over its cosines `s / temperature`
    with every tool of its set; `l2 * |delta|^2` keeps the map near the identity. Every set
    weighs the same, however many queries it has.

    Args:
        sets: The catalogs with their queries; all of one dimension.
        l2: Weight of the pull towards the identity.
        temperature: Softmax temperature of the cosines.
        epochs: Passes over every set.
        learning_rate: Adam's step size.
        batch: Queries per step.
        seed: Seed of the order of the queries.
    """
    np: Any = require("numpy")
    usable = [s for s in sets if any(s.positives)]
    if not usable:
        raise ValueError("no query has a gold tool to fit on")
    dim = int(usable[0].queries.shape[1])
    rng = random.Random(seed)
    delta = np.zeros((dim, dim), dtype=np.float64)
    m1 = np.zeros_like(delta)
    m2 = np.zeros_like(delta)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    step = 0
    for _ in range(epochs):
        for data in usable:
            rows = [i for i, p in enumerate(data.positives) if p]
            rng.shuffle(rows)
            batches = max(1, math.ceil(len(rows) / batch))
            tools = np.asarray(data.tools, dtype=np.float64)
            for start in range(0, len(rows), batch):
                chosen = rows[start : start + batch]
                grad = _gradient(np, delta, data, chosen, tools, temperature) / (
                    len(chosen) * batches * len(usable)
                )
                grad += 2.0 * l2 * delta / (len(usable) * batches)
                step += 1
                m1 = beta1 * m1 + (1 - beta1) * grad
                m2 = beta2 * m2 + (1 - beta2) * grad * grad
                delta -= (
                    learning_rate
                    * (m1 / (1 - beta1**step))
                    / (np.sqrt(m2 / (1 - beta2**step)) + eps)
                )
    return QueryAdapter(delta)


def _gradient(
    np: Any, delta: Any, data: AdapterSet, chosen: list[int], tools: Any, temperature: float
) -> Any:
    """The gradient of the summed softmax loss of the `chosen` queries with respect to W."""
    q = np.asarray(data.queries[chosen], dtype=np.float64)
    mapped = q + q @ delta.T
    norms = np.linalg.norm(mapped, axis=1, keepdims=True)
    unit = mapped / norms
    scores = unit @ tools.T / temperature
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    probs = weights / weights.sum(axis=1, keepdims=True)
    gold = np.zeros_like(probs)
    for row, index in enumerate(chosen):
        # A row named twice is one gold tool: counted twice, it would halve the gold shares.
        positives = sorted(set(data.positives[index]))
        share = weights[row, positives]
        gold[row, positives] = share / share.sum()
    d_unit = (probs - gold) @ tools / temperature
    d_mapped = (d_unit - unit * (d_unit * unit).sum(axis=1, keepdims=True)) / norms
    return d_mapped.T @ q
