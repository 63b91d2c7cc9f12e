"""The hybrid's fusion: weighted reciprocal rank, with each ranking's first tool kept among the first ``k``."""

from toolhub.search.hybrid import _fused

AGREED = ["agreed1", "agreed2", "agreed3", "agreed4", "agreed5", "agreed6"]


def test_a_rankings_first_tool_is_kept_though_agreement_outscores_it() -> None:
    # given a tool the lexical ranking is sure of, which the model ranks only 30th, and five both rank well
    lexical = ["sure", *AGREED]
    semantic = [*AGREED, *(f"other{index}" for index in range(23)), "sure"]

    # when they are fused into five
    fused = _fused([(1.0, lexical), (1.5, semantic)], 5)

    # then the sure tool takes the place of the lowest agreed one, and the five keep their fused order
    assert fused == ["agreed1", "agreed2", "agreed3", "agreed4", "sure"]
    plain = _fused([(1.0, lexical[1:]), (1.5, semantic)], 5)
    assert plain == AGREED[:5]


def test_each_rankings_first_is_kept_and_nothing_twice() -> None:
    lexical = ["lex-first", *AGREED]
    semantic = ["sem-first", *AGREED, *(f"other{index}" for index in range(30)), "lex-first"]

    fused = _fused([(1.0, lexical), (1.5, semantic)], 5)

    assert {"lex-first", "sem-first"} <= set(fused) and len(set(fused)) == len(fused) == 5


def test_fewer_places_than_firsts_leaves_the_plain_fused_order() -> None:
    lexical, semantic = ["a", "b", "c"], ["b", "c", "a"]
    assert _fused([(1.0, lexical), (1.5, semantic)], 1) == ["b"]
    assert _fused([(1.0, lexical), (1.5, semantic)], 0) == []


def test_a_single_ranking_is_its_own_order() -> None:
    assert _fused([(1.0, ["x", "y", "z"])], 2) == ["x", "y"]
    assert _fused([(1.0, []), (1.5, [])], 5) == []
