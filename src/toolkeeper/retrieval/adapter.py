"""A learned linear map on query vectors: the query side of the dense ranking, fitted to tools.

What it is: `QueryAdapter` multiplies a query's embedding by a square matrix `I + delta` and
normalizes it again before it is compared with tool vectors, which stay as the embedder made
them (so cached tool vectors stay valid). `fit_query_adapter` fits `delta` (numpy only) by a
softmax over every tool of a catalog: each query's gold tools against all the others, with an
L2 pull towards the identity; given requests that bring catalogs of their own (`AbstainSet`),
also by how well a request's best cosine tells whether some tool of its catalog answers it,
which is what abstention reads. What it is not: an embedder of its own (see `embed`), or a
ranker (see `fusion`).

The bundled matrix (`minilm_query_adapter.npy`, float16, 295 KB) is for the bundled MiniLM
embedder. It was written by::

    toolkeeper eval fit-adapter --out minilm_query_adapter.npy \\
        --set bench/bfcl/tools.jsonl bench/bfcl/queries.dev.jsonl name \\
        --set bench/metatool/tools.jsonl bench/metatool/queries.dev.jsonl id \\
        --set bench/sealtools/tools.jsonl bench/sealtools/queries.dev.jsonl id \\
        --abstain bench/bfcl-abstain/queries.dev.jsonl

(abstention weight 5, 20 epochs: the defaults), which also printed the `AbstentionModel`
defaults. Fitted on a random half of each set's queries and scored on the other half
(`--holdout`), dense Recall@5 / @10 goes from .766 / .837 to .866 / .917 on BFCL (by name),
from .757 / .824 to .888 / .923 on MetaTool, and stays near .585 / .670 on Seal-Tools (.579 /
.673); without `--abstain`, .867 / .913, .893 / .928 and .578 / .671. Fitted on two of the sets
and scored on the third, whose tools it never saw, it changed Recall@5 by +.004 (BFCL), +.030
(MetaTool) and +.007 (Seal-Tools) (measured with an earlier fit, of weight 10 and 10 epochs,
when tool texts were still embedded in batches, which moved no figure by more than .003): it
helps most where the catalog and its requests resemble what it was fitted on, and
`eval fit-adapter` fits one on a catalog of your own.
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

__all__ = [
    "ABSTAIN_WEIGHT",
    "EPOCHS",
    "AbstainSet",
    "AdapterSet",
    "QueryAdapter",
    "bundled_adapter",
    "fit_query_adapter",
]

BUNDLED = "minilm_query_adapter.npy"
"""The file, in this package, of the adapter fitted for the bundled MiniLM embedder."""
ABSTAIN_WEIGHT = 5.0
"""The default weight of the abstention loss against one set's (the bundled adapter's)."""
EPOCHS = 20
"""The default number of passes over the data (the bundled adapter's)."""


_NPY_MAGIC = b"\x93NUMPY"
"""How every `.npy` file begins."""


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
        """Read an adapter saved by `save` (a `.npy` file of `delta`).

        Raises:
            OSError: the file cannot be read.
            ValueError: it is not a `.npy` file of a square matrix of finite numbers.
        """
        np: Any = require("numpy")
        with Path(path).open("rb") as file:
            # Any other file numpy would read as a pickle, refused with advice to load it
            # unsafely; an empty one raised EOFError, and a .npz gave an archive, not a matrix.
            if file.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
                raise ValueError(
                    "not a .npy file (a query adapter is written by `toolkeeper eval "
                    "fit-adapter` or QueryAdapter.save)"
                )
            file.seek(0)
            return cls(np.load(file, allow_pickle=False))

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


@dataclass(frozen=True, kw_only=True, slots=True)
class AbstainSet:
    """Requests that each bring a small catalog of their own, which answers some of them and
    none of the others: fitted with them, the adapter also keeps a request's best cosine low
    when no tool of its catalog answers it, which is what abstention reads."""

    queries: Any
    """(n, d) unit query vectors."""
    tools: Any
    """The unit vectors of every request's catalog, one after the other."""
    offsets: Sequence[int]
    """Request i's tools are rows `offsets[i]:offsets[i + 1]` of `tools` (n + 1 entries)."""
    answerable: Sequence[bool]
    """Whether some tool of request i's catalog answers it."""

    def subset(self, rows: Sequence[int]) -> AbstainSet:
        """These requests only, with their catalogs (nothing embedded again)."""
        rows = list(rows)
        parts = [range(self.offsets[i], self.offsets[i + 1]) for i in rows]
        offsets = [0]
        for part in parts:
            offsets.append(offsets[-1] + len(part))
        return AbstainSet(
            queries=self.queries[rows],
            tools=self.tools[[t for part in parts for t in part]],
            offsets=offsets,
            answerable=[self.answerable[i] for i in rows],
        )


class _Adam:
    """Adam's update for one array."""

    def __init__(self, np: Any, value: Any, learning_rate: float) -> None:
        self.value, self.rate, self.step = value, learning_rate, 0
        self.m1, self.m2 = np.zeros_like(value), np.zeros_like(value)
        self._np = np

    def update(self, grad: Any) -> None:
        beta1, beta2 = 0.9, 0.999
        self.step += 1
        self.m1 = beta1 * self.m1 + (1 - beta1) * grad
        self.m2 = beta2 * self.m2 + (1 - beta2) * grad * grad
        self.value = self.value - self.rate * (self.m1 / (1 - beta1**self.step)) / (
            self._np.sqrt(self.m2 / (1 - beta2**self.step)) + 1e-8
        )


def fit_query_adapter(
    sets: Sequence[AdapterSet],
    *,
    abstain: AbstainSet | None = None,
    abstain_weight: float = ABSTAIN_WEIGHT,
    l2: float = 1e-2,
    temperature: float = 0.05,
    epochs: int = EPOCHS,
    learning_rate: float = 1e-3,
    batch: int = 256,
    seed: int = 0,
) -> QueryAdapter:
    """Fit `delta` by Adam on the mean over sets of each set's mean softmax loss.

    A query's loss is `logsumexp(s) - logsumexp(s[gold])` over its cosines `s / temperature`
    with every tool of its set; `l2 * |delta|^2` keeps the map near the identity. Every set
    weighs the same, however many queries it has. With `abstain`, every step also adds
    `abstain_weight` times the mean logistic loss of telling its answerable requests from the
    others by `sigmoid(a * (m - b))`, where `m` is a smooth maximum of a request's cosines with
    its own catalog and `a`, `b` are fitted along.

    Args:
        sets: The catalogs with their queries; all of one dimension.
        abstain: Requests with catalogs of their own, some of which no tool answers.
        abstain_weight: Weight of the abstention loss against one set's.
        l2: Weight of the pull towards the identity.
        temperature: Softmax temperature of the cosines.
        epochs: Passes over every set.
        learning_rate: Adam's step size.
        batch: Queries per step.
        seed: Seed of the order of the queries.

    Raises:
        ValueError: No query has a gold tool, or `abstain_weight` is negative, NaN or infinite.
    """
    np: Any = require("numpy")
    usable = [s for s in sets if any(s.positives)]
    if not usable:
        raise ValueError("no query has a gold tool to fit on")
    if not 0 <= abstain_weight < math.inf:  # (NaN is neither)
        raise ValueError(f"abstain_weight is a weight of 0 or more, not {abstain_weight}")
    dim = int(usable[0].queries.shape[1])
    rng = random.Random(seed)
    delta = _Adam(np, np.zeros((dim, dim), dtype=np.float64), learning_rate)
    scale = _Adam(np, np.array([10.0, 0.5]), learning_rate)  # a, b of the abstention loss
    abstain_rows = _abstain_rows(np, abstain) if abstain is not None else None
    tool_rows = [np.asarray(data.tools, dtype=np.float64) for data in usable]
    for _ in range(epochs):
        for data, tools in zip(usable, tool_rows, strict=True):
            rows = [i for i, p in enumerate(data.positives) if p]
            rng.shuffle(rows)
            batches = max(1, math.ceil(len(rows) / batch))
            share = len(usable) * batches
            for start in range(0, len(rows), batch):
                chosen = rows[start : start + batch]
                grad = _gradient(np, delta.value, data, chosen, tools, temperature) / (
                    len(chosen) * share
                )
                grad += 2.0 * l2 * delta.value / share
                if abstain_rows is not None:
                    d_delta, d_scale = _abstain_gradient(np, delta.value, scale.value, abstain_rows)
                    grad += abstain_weight * d_delta / share
                    scale.update(abstain_weight * d_scale / share)
                delta.update(grad)
    return QueryAdapter(delta.value)


_SMOOTH_MAX = 0.02
"""Temperature of the smooth maximum of a request's cosines in the abstention loss."""


def _abstain_rows(np: Any, data: AbstainSet) -> tuple[Any, Any, Any, Any] | None:
    """The requests that have tools: their vectors, labels, tool vectors and tool owners
    (None: no request has a tool)."""
    offsets = np.asarray(data.offsets)
    sizes = np.diff(offsets)
    keep = sizes > 0
    if not keep.any():
        return None
    starts = offsets[:-1][keep]
    sizes = sizes[keep]
    tools = np.concatenate(
        [
            np.asarray(data.tools[s : s + n], dtype=np.float64)
            for s, n in zip(starts, sizes, strict=True)
        ]
    )
    return (
        np.asarray(data.queries, dtype=np.float64)[keep],
        np.asarray(data.answerable, dtype=np.float64)[keep],
        tools,
        np.repeat(np.arange(len(sizes)), sizes),
    )


def _abstain_gradient(
    np: Any, delta: Any, scale: Any, rows: tuple[Any, Any, Any, Any]
) -> tuple[Any, Any]:
    """The gradient of the mean abstention loss with respect to W and to (a, b)."""
    q, y, tools, owner = rows
    unit, norms = _mapped(np, q, delta)
    cosines = (unit[owner] * tools).sum(axis=1) / _SMOOTH_MAX
    top = np.full(len(q), -np.inf)
    np.maximum.at(top, owner, cosines)
    weights = np.exp(cosines - top[owner])
    totals = np.zeros(len(q))
    np.add.at(totals, owner, weights)
    smooth = (top + np.log(totals)) * _SMOOTH_MAX
    a, b = scale
    prob = sigmoid(np, a * (smooth - b))
    d_logit = (prob - y) / len(q)
    d_scale = np.array([(d_logit * (smooth - b)).sum(), -a * d_logit.sum()])
    d_cos = (a * d_logit)[owner] * weights / totals[owner]
    d_unit = np.zeros_like(unit)
    np.add.at(d_unit, owner, d_cos[:, None] * tools)
    return _through_map(np, q, unit, norms, d_unit), d_scale


def _gradient(
    np: Any, delta: Any, data: AdapterSet, chosen: list[int], tools: Any, temperature: float
) -> Any:
    """The gradient of the summed softmax loss of the `chosen` queries with respect to W."""
    q = np.asarray(data.queries[chosen], dtype=np.float64)
    unit, norms = _mapped(np, q, delta)
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
    return _through_map(np, q, unit, norms, d_unit)


def sigmoid(np: Any, logits: Any) -> Any:
    """The logistic function of `logits` (clipped, so a large one cannot overflow)."""
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -50, 50)))


def _mapped(np: Any, q: Any, delta: Any) -> tuple[Any, Any]:
    """The rows of `q` mapped by `I + delta` and normalized, and their norms before."""
    mapped = q + q @ delta.T
    norms = np.linalg.norm(mapped, axis=1, keepdims=True)
    return mapped / norms, norms


def _through_map(np: Any, q: Any, unit: Any, norms: Any, d_unit: Any) -> Any:
    """The gradient with respect to W of a loss whose gradient is `d_unit` at the mapped,
    normalized rows `unit` of `q` (see `_mapped`)."""
    d_mapped = (d_unit - unit * (d_unit * unit).sum(axis=1, keepdims=True)) / norms
    return d_mapped.T @ q
