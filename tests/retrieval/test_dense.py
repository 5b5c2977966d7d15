import pytest

from toolkeeper.retrieval.dense import VectorIndex

np = pytest.importorskip("numpy")


def _unit(*values: float) -> object:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_removal_moves_the_last_row_into_the_gap() -> None:
    index = VectorIndex(2)
    index.upsert("a", _unit(1, 0))
    index.upsert("b", _unit(0, 1))
    index.upsert("c", _unit(1, 1))
    index.remove("a")
    assert len(index) == 2
    assert [k for k, _ in index.search(_unit(1, 1), 3)] == ["c", "b"]
    assert "a" not in index


def test_search_over_an_allowed_subset_ranks_only_it() -> None:
    index = VectorIndex(2)
    for i in range(100):
        index.upsert(f"t{i}", _unit(1, i / 100))
    hits = index.search(_unit(1, 0), 3, allowed={"t50", "t90"})
    assert [k for k, _ in hits] == ["t50", "t90"]
