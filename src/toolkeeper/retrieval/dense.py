"""Dense retrieval: tool vectors in one matrix, updated in place, scored by dot product.

What it is: a growable float32 matrix with a row per tool (add, replace, remove by swapping the
last row in: no rebuild), searched by cosine similarity, optionally over an allowed subset of
rows only. What it is not: an embedder (see `toolkeeper.retrieval.embed`).
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any

from ._deps import require

__all__ = ["VectorIndex"]


@functools.cache
def _blas() -> Any:
    return require("threadpoolctl").ThreadpoolController()


def _one_blas_thread() -> Any:
    """A context that runs BLAS on one thread, for this process's BLAS libraries.

    One product of 10,000 x 384 takes 0.2 ms on two BLAS threads and 0.4 ms on one, but
    OpenBLAS's second thread then spins for a while after each product, taking a whole core
    from the query embedding that runs next (CPU per query doubled in `bench retrieval`).
    """
    return _blas().limit(limits=1, user_api="blas")


class VectorIndex:
    """Unit vectors keyed by tool name.

    Args:
        dimension: Length of every vector.
    """

    def __init__(self, dimension: int) -> None:
        self._np: Any = require("numpy")
        self.dimension = dimension
        self._matrix: Any = self._np.zeros((64, dimension), dtype=self._np.float32)
        self._keys: list[str] = []
        self._rows: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def upsert(self, key: str, vector: Any) -> None:
        """Add or replace the vector of `key`."""
        row = self._rows.get(key)
        if row is None:
            row = len(self._keys)
            if row == self._matrix.shape[0]:
                grown = self._np.zeros((row * 2, self.dimension), dtype=self._np.float32)
                grown[:row] = self._matrix
                self._matrix = grown
            self._keys.append(key)
            self._rows[key] = row
        self._matrix[row] = vector

    def remove(self, key: str) -> None:
        """Remove the vector of `key`, if any (the last row moves into its place)."""
        row = self._rows.pop(key, None)
        if row is None:
            return
        last = len(self._keys) - 1
        if row != last:
            moved = self._keys[last]
            self._matrix[row] = self._matrix[last]
            self._keys[row] = moved
            self._rows[moved] = row
        self._keys.pop()

    def vector(self, key: str) -> Any:
        """The stored vector of `key` (KeyError when absent)."""
        return self._matrix[self._rows[key]]

    def search(
        self, query: Any, k: int, *, allowed: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` nearest keys to the unit vector `query` as (key, cosine), best first.

        Args:
            query: A unit vector of this index's dimension.
            k: How many results at most.
            allowed: When given, only these keys are scored.
        """
        np = self._np
        if allowed is None:
            rows = None
            matrix = self._matrix[: len(self._keys)]
        else:
            rows = np.fromiter(
                (self._rows[key] for key in allowed if key in self._rows), dtype=np.int64
            )
            matrix = self._matrix[rows]
        if matrix.shape[0] == 0 or k <= 0:
            return []
        with _one_blas_thread():
            scores = matrix @ query
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        keys = self._keys
        if rows is None:
            return [(keys[int(i)], float(scores[i])) for i in top]
        return [(keys[int(rows[i])], float(scores[i])) for i in top]
