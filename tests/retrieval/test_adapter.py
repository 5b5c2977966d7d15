from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.core.values import Effect, ToolSpec
from toolkeeper.retrieval.adapter import (
    AbstainSet,
    AdapterSet,
    QueryAdapter,
    bundled_adapter,
    fit_query_adapter,
)
from toolkeeper.retrieval.embed import HashingEmbedder
from toolkeeper.retrieval.selector import Selector

from ..conftest import APP

np = pytest.importorskip("numpy")


def _unit(rows: Any) -> Any:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _skewed_queries(rng: Any, tools: Any, skew: Any, n: int) -> tuple[Any, list[list[int]]]:
    """Queries that ask for one tool each, written in a space skewed away from the tools'."""
    gold = rng.integers(0, len(tools), size=n)
    noise = rng.normal(scale=0.15, size=(n, tools.shape[1]))
    return _unit((tools[gold] + noise) @ skew.T), [[int(g)] for g in gold]


def _top1(queries: Any, tools: Any, positives: Sequence[Sequence[int]]) -> float:
    best = np.argmax(queries @ tools.T, axis=1)
    return float(np.mean([b in p for b, p in zip(best.tolist(), positives, strict=True)]))


def test_an_adapter_fitted_on_some_queries_finds_the_tools_of_queries_it_never_saw() -> None:
    rng = np.random.default_rng(7)
    dim = 24
    tools = _unit(rng.normal(size=(80, dim)))
    skew = np.eye(dim) + rng.normal(scale=0.45, size=(dim, dim))
    train, train_gold = _skewed_queries(rng, tools, skew, 800)
    test, test_gold = _skewed_queries(rng, tools, skew, 400)
    adapter = fit_query_adapter(
        [AdapterSet(queries=train, tools=tools, positives=train_gold)],
        epochs=30,
        learning_rate=1e-2,
    )
    before = _top1(test, tools, test_gold)
    after = _top1(adapter.apply(test), tools, test_gold)
    assert before < 0.75
    assert after > before + 0.15


def test_adapted_queries_are_unit_vectors_and_a_saved_adapter_reads_back(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(1)
    adapter = QueryAdapter(rng.normal(scale=0.05, size=(16, 16)))
    queries = _unit(rng.normal(size=(5, 16))).astype(np.float32)
    mapped = adapter.apply(queries)
    assert mapped.shape == (5, 16)
    assert np.allclose(np.linalg.norm(mapped, axis=1), 1.0, atol=1e-5)
    adapter.save(tmp_path / "adapter.npy")
    again = QueryAdapter.load(tmp_path / "adapter.npy")
    assert np.allclose(again.apply(queries), mapped, atol=1e-3)


def test_an_adapter_has_the_id_of_the_file_it_saves(tmp_path: Path) -> None:
    adapter = QueryAdapter(np.random.default_rng(5).normal(scale=0.05, size=(64, 64)))
    adapter.save(tmp_path / "adapter.npy")
    assert QueryAdapter.load(tmp_path / "adapter.npy").id == adapter.id


def test_a_zero_adapter_leaves_queries_as_they_are() -> None:
    queries = _unit(np.random.default_rng(2).normal(size=(3, 8))).astype(np.float32)
    assert np.allclose(QueryAdapter(np.zeros((8, 8))).apply(queries), queries, atol=1e-6)


def test_an_adapter_that_is_not_a_square_matrix_is_refused() -> None:
    with pytest.raises(ValueError, match="square matrix"):
        QueryAdapter(np.zeros((4, 3)))


@pytest.mark.parametrize("entry", [float("nan"), float("inf")])
def test_an_adapter_with_an_entry_that_is_not_finite_is_refused(entry: float) -> None:
    delta = np.zeros((4, 4))
    delta[1, 2] = entry
    with pytest.raises(ValueError, match="finite numbers"):
        QueryAdapter(delta)


def test_fitting_without_any_gold_tool_is_refused() -> None:
    empty = AdapterSet(queries=np.zeros((2, 4)), tools=np.eye(4), positives=[[], []])
    with pytest.raises(ValueError, match="no query has a gold tool"):
        fit_query_adapter([empty])


def test_the_bundled_adapter_fits_the_bundled_model_and_moves_queries() -> None:
    adapter = bundled_adapter()
    assert adapter.dimension == 384
    queries = _unit(np.random.default_rng(3).normal(size=(4, 384))).astype(np.float32)
    moved = (adapter.apply(queries) * queries).sum(axis=1)
    assert np.all(moved < 0.999)  # fitted, not the identity
    assert np.all(moved > 0.5)  # near it: the map stays close to the embedder's space


class _Steering(HashingEmbedder):
    """Tools embed by their words; a query's vector is that of the text it is steered to."""

    def __init__(self, steer_to: str) -> None:
        super().__init__()
        self.steer_to = steer_to
        self.query_texts: list[str] = []

    def embed_queries(self, texts: Sequence[str]) -> Any:
        self.query_texts.extend(texts)
        return self.embed([self.steer_to] * len(texts))


def test_the_selector_embeds_queries_with_embed_queries_and_tools_with_embed() -> None:
    embedder = _Steering("archive old invoices ledger")
    selector = Selector(embedder=embedder)
    selector.upsert_many(
        [
            ToolSpec(
                name="archive_invoices",
                description="archive old invoices ledger",
                effect=Effect.READ_ONLY,
            ),
            ToolSpec(
                name="weather", description="current weather forecast", effect=Effect.READ_ONLY
            ),
        ]
    )
    ranking = selector.rank("weather forecast", allowed={"archive_invoices", "weather"}, depth=2)
    selector.close()
    assert embedder.query_texts == ["weather forecast"]
    assert ranking.dense[0][0] == "archive_invoices"


def test_an_adapter_of_another_dimension_is_refused_when_the_embedder_is_made() -> None:
    pytest.importorskip("onnxruntime")
    from toolkeeper.retrieval.embed import MiniLMEmbedder

    with pytest.raises(ValueError, match="maps 16-dimensional vectors; this model's have 384"):
        MiniLMEmbedder(query_adapter=QueryAdapter(np.zeros((16, 16))))


def test_a_keeper_selects_with_the_query_adapter_it_was_given(model_cache: Path) -> None:
    pytest.importorskip("onnxruntime")
    from toolkeeper import Keeper

    adapter = QueryAdapter(np.zeros((384, 384)))
    keeper = Keeper(principal=APP, ledger="memory://", query_adapter=adapter)
    plain = Keeper(principal=APP, ledger="memory://", query_adapter=False)
    default = Keeper(principal=APP, ledger="memory://")
    try:
        assert keeper.selector._embedder.query_adapter is adapter  # type: ignore[union-attr]
        assert plain.selector._embedder.query_adapter is None  # type: ignore[union-attr]
        assert default.selector._embedder.query_adapter is bundled_adapter()  # type: ignore[union-attr]
    finally:
        for k in (keeper, plain, default):
            k.selector.close()


def test_a_gold_tool_named_twice_fits_as_if_named_once() -> None:
    rng = np.random.default_rng(4)
    tools = _unit(rng.normal(size=(6, 8)))
    queries = _unit(rng.normal(size=(3, 8)))
    once = AdapterSet(queries=queries, tools=tools, positives=[[0], [1, 2], [3]])
    twice = AdapterSet(queries=queries, tools=tools, positives=[[0, 0], [1, 2, 1], [3]])
    expected = fit_query_adapter([once], epochs=5, learning_rate=1e-2).apply(queries)
    assert np.allclose(
        fit_query_adapter([twice], epochs=5, learning_rate=1e-2).apply(queries), expected
    )


def _abstain_requests(rng: Any, tools: Any, answered: Any, unanswered: Any, n: int) -> AbstainSet:
    """Requests with three tools each, written like the first of them; the answerable ones
    in one style (`answered`), the others in another (`unanswered`)."""
    queries, catalogs, offsets, answerable = [], [], [0], []
    for _ in range(n):
        catalog = rng.choice(len(tools), 3, replace=False)
        fits = bool(rng.random() < 0.5)
        style = answered if fits else unanswered
        noise = 0.1 * rng.normal(size=tools.shape[1]) / np.sqrt(tools.shape[1])
        queries.append(0.6 * tools[catalog[0]] + 0.8 * style + noise)
        catalogs.extend(tools[catalog])
        offsets.append(offsets[-1] + 3)
        answerable.append(fits)
    return AbstainSet(
        queries=_unit(np.array(queries)),
        tools=np.array(catalogs),
        offsets=offsets,
        answerable=answerable,
    )


def _separation(adapter: QueryAdapter, data: AbstainSet) -> float:
    """The chance that an answerable request's best cosine beats an unanswerable one's."""
    queries = adapter.apply(data.queries)
    best = np.array(
        [
            (data.tools[data.offsets[i] : data.offsets[i + 1]] @ queries[i]).max()
            for i in range(len(queries))
        ]
    )
    fits = np.array(data.answerable)
    return float((best[fits][:, None] > best[~fits][None, :]).mean())


def test_fitted_with_requests_no_tool_answers_the_adapter_keeps_their_cosines_lower() -> None:
    rng = np.random.default_rng(5)
    dim = 24
    tools = _unit(rng.normal(size=(200, dim)))
    answered, unanswered = _unit(rng.normal(size=(2, dim)))
    train = _abstain_requests(rng, tools, answered, unanswered, 400)
    test = _abstain_requests(rng, tools, answered, unanswered, 300)
    gold = rng.integers(0, len(tools), 400)
    noise = 0.1 * rng.normal(size=(400, dim)) / np.sqrt(dim)
    requests = AdapterSet(
        queries=_unit(0.6 * tools[gold] + 0.8 * answered + noise),
        tools=tools,
        positives=[[int(g)] for g in gold],
    )
    plain = fit_query_adapter([requests])
    taught = fit_query_adapter([requests], abstain=train)
    assert _separation(taught, test) > _separation(plain, test) + 0.04


def test_the_abstention_gradient_is_that_of_its_loss() -> None:
    from toolkeeper.retrieval.adapter import _SMOOTH_MAX, _abstain_gradient, _abstain_rows

    rng = np.random.default_rng(0)
    dim = 6
    data = AbstainSet(
        queries=_unit(rng.normal(size=(5, dim))),
        tools=_unit(rng.normal(size=(9, dim))),
        offsets=[0, 2, 2, 5, 7, 9],  # (the second request has no tool: it is left out)
        answerable=[True, False, False, True, False],
    )
    rows = _abstain_rows(np, data)
    delta = rng.normal(scale=0.1, size=(dim, dim))
    scale = np.array([8.0, 0.3])

    def loss(delta: Any, scale: Any) -> float:
        queries, labels, tools, owner = rows
        mapped = _unit(queries + queries @ delta.T)
        cosines = (mapped[owner] * tools).sum(axis=1)
        total = 0.0
        for i in range(len(queries)):
            best = _SMOOTH_MAX * np.log(np.exp(cosines[owner == i] / _SMOOTH_MAX).sum())
            p = 1 / (1 + np.exp(-scale[0] * (best - scale[1])))
            total -= labels[i] * np.log(p) + (1 - labels[i]) * np.log(1 - p)
        return total / len(queries)

    d_delta, d_scale = _abstain_gradient(np, delta, scale, rows)
    step = 1e-6
    numeric = np.zeros_like(delta)
    for i in range(dim):
        for j in range(dim):
            up, down = delta.copy(), delta.copy()
            up[i, j] += step
            down[i, j] -= step
            numeric[i, j] = (loss(up, scale) - loss(down, scale)) / (2 * step)
    assert np.allclose(d_delta, numeric, atol=1e-7)
    for k in range(2):
        bump = np.eye(2)[k] * step
        assert d_scale[k] == pytest.approx(
            (loss(delta, scale + bump) - loss(delta, scale - bump)) / (2 * step), abs=1e-7
        )


def test_requests_without_tools_teach_the_adapter_nothing() -> None:
    rng = np.random.default_rng(2)
    tools = _unit(rng.normal(size=(10, 8)))
    requests = AdapterSet(queries=tools[:4], tools=tools, positives=[[0], [1], [2], [3]])
    toolless = AbstainSet(
        queries=_unit(rng.normal(size=(2, 8))),
        tools=np.zeros((0, 8)),
        offsets=[0, 0, 0],
        answerable=[True, False],
    )
    plain = fit_query_adapter([requests], epochs=2)
    assert fit_query_adapter([requests], abstain=toolless, epochs=2).id == plain.id


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf")])
def test_an_abstention_weight_that_is_no_weight_is_refused(weight: float) -> None:
    tools = _unit(np.eye(4))
    requests = AdapterSet(queries=tools, tools=tools, positives=[[0], [1], [2], [3]])
    with pytest.raises(ValueError, match="abstain_weight"):
        fit_query_adapter([requests], abstain_weight=weight, epochs=1)
