from toolkeeper.retrieval.fusion import AbstentionModel, FusionConfig, fuse


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
