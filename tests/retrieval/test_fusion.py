from toolkeeper.retrieval.fusion import (
    AbstentionModel,
    Coverage,
    Fused,
    FusionConfig,
    fuse,
    interleave,
)


def test_a_tool_both_rankers_like_beats_one_only_one_likes() -> None:
    fused = fuse(
        [("a", 9.0), ("b", 5.0)],
        [("b", 0.8), ("c", 0.7)],
        FusionConfig(),
    )
    assert [f.name for f in fused] == ["b", "a", "c"]
    assert fused[0].keyword_rank == 2
    assert fused[0].dense_rank == 1
    assert fused[0].similarity == 0.8


def test_weights_shift_the_balance() -> None:
    keyword = [("a", 9.0)]
    dense = [("b", 0.9)]
    assert fuse(keyword, dense, FusionConfig(keyword_weight=2.0))[0].name == "a"
    assert fuse(keyword, dense, FusionConfig(dense_weight=2.0))[0].name == "b"


def test_similarity_of_keyword_only_tools_is_kept_for_abstention() -> None:
    fused = fuse([("a", 1.0)], [], FusionConfig(), similarity={"a": 0.42})
    assert fused[0].similarity == 0.42
    assert fused[0].dense_rank is None


def test_fit_probability_grows_with_similarity_and_coverage() -> None:
    model = AbstentionModel()
    weak = model.fit_probability(0.1, 0.0, 6)
    strong = model.fit_probability(0.7, 0.8, 6)
    assert weak < 0.5 < strong
    assert model.fit_probability(0.4, 0.9, 6) > model.fit_probability(0.4, 0.1, 6)


def test_a_low_similarity_counts_less_against_a_request_the_embedder_cannot_read() -> None:
    # The bundled embedder reads English: a request in Chinese scores low against every tool.
    model = AbstentionModel()
    assert model.fit_probability(0.1, 0.0, 3, foreign=1.0) > 2 * model.fit_probability(0.1, 0.0, 3)


def test_the_learned_ranker_lifts_the_candidate_that_covers_the_query() -> None:
    # Both lists rank "vague" first; "exact" holds every word of the query and its name.
    keyword = [("vague", 9.0), ("exact", 8.5)]
    dense = [("vague", 0.62), ("exact", 0.60)]
    coverage = {
        "vague": Coverage(query=0.2, name=0.0),
        "exact": Coverage(query=1.0, name=1.0),
    }
    learned = fuse(keyword, dense, FusionConfig(), coverage=coverage)
    assert [f.name for f in learned] == ["exact", "vague"]
    rrf = fuse(keyword, dense, FusionConfig(learned=False), coverage=coverage)
    assert [f.name for f in rrf] == ["vague", "exact"]


def test_the_learned_ranker_needs_coverage_and_a_dense_ranking() -> None:
    keyword = [("a", 9.0), ("b", 8.0)]
    coverage = {"a": Coverage(query=0.0, name=0.0), "b": Coverage(query=1.0, name=1.0)}
    # Keyword search alone (no embedder): the BM25 order stands.
    assert [f.name for f in fuse(keyword, [], FusionConfig(), coverage=coverage)] == ["a", "b"]


def test_a_dense_only_candidate_is_scored_by_its_cosine() -> None:
    keyword = [("a", 3.0)]
    dense = [("b", 0.9), ("a", 0.3)]
    coverage = {n: Coverage(query=0.5, name=0.5) for n in ("a", "b")}
    fused = fuse(keyword, dense, FusionConfig(), coverage=coverage)
    assert [f.name for f in fused] == ["b", "a"]
    assert fused[0].keyword_rank is None and fused[0].similarity == 0.9


def _ranked(*names: str) -> list[Fused]:
    return [Fused(name=n, score=float(-i)) for i, n in enumerate(names)]


def test_each_clauses_first_tool_follows_the_whole_requests_first_two() -> None:
    whole = _ranked("a", "b", "c", "d", "e")
    first = _ranked("x", "a", "y")
    second = _ranked("z", "w")
    order = [f.name for f in interleave(whole, [first, second])]
    # a clause's first counts as the request's 2nd, its r-th as the (2r + 1)-th; at one place
    # the request first
    assert order == ["a", "b", "x", "z", "c", "d", "e", "w", "y"]


def test_the_dense_rankings_first_tools_are_never_buried_by_the_learned_order() -> None:
    whole = _ranked("a", "b", "c", "d", "e", "f", "g")
    order = [f.name for f in interleave(whole, [], dense=["g", "f", "a"])]
    # the dense r-th counts as the (2r + 1)-th at worst; at one place the request first
    assert order == ["a", "b", "c", "g", "d", "e", "f"]
    assert interleave(whole, [], dense=["unknown"]) == whole


def test_a_tool_keeps_its_best_place_and_the_whole_requests_scores() -> None:
    whole = _ranked("a", "b", "c", "d", "e", "f")
    mine = Fused(name="f", score=99.0, similarity=0.9)
    merged = interleave(whole, [[mine]])
    assert [f.name for f in merged][:4] == ["a", "b", "f", "c"]
    assert merged[2] is whole[5]
    assert interleave(whole, []) == whole
