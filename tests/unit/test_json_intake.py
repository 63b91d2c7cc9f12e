"""toolhub.json_intake: the one way JSON from outside is decoded and checked, whatever carried it."""

import json
from typing import Any

import pytest

from toolhub.json_intake import JSONRefused, RefusalKind, json_loads_checked, json_nesting_exceeds, json_value_problem


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("text", "kind", "sentence"),
    [
        (nested_list(100_000), RefusalKind.NESTING, "The JSON nests lists and objects 100000 levels deep; at most 5"),
        (nested_list(6), RefusalKind.NESTING, "The JSON nests lists and objects 6 levels deep; at most 5 are"),
        ('{"note": ', RefusalKind.SYNTAX, "The JSON is not valid JSON (Expecting value)"),
        ('{"note": "a\\u0000b"}', RefusalKind.STORAGE, "The JSON cannot be stored: f.note contains a NUL character"),
        ('["\\ud800"]', RefusalKind.STORAGE, "The JSON cannot be stored: f[0] contains an invalid character"),
        ('{"a": NaN}', RefusalKind.STORAGE, "The JSON cannot be stored: f.a is not a finite number"),
    ],
    ids=["thousands-deep", "one-too-deep", "not-json", "nul", "lone-surrogate", "nan"],
)
def test_text_is_refused_with_its_reason_and_never_raises_anything_else(
    text: str, kind: RefusalKind, sentence: str
) -> None:
    with pytest.raises(JSONRefused) as refused:
        json_loads_checked(text, max_depth=5, path="f")

    assert refused.value.kind == kind
    assert str(refused.value).startswith(sentence)
    assert isinstance(refused.value, ValueError)  # code falling back on text json.loads rejects keeps doing so


def test_text_within_the_limits_decodes_as_json_loads_does() -> None:
    text = '{"a": [1, {"b": "[[[ brackets in text ]]]"}], "c": null}'

    assert json_loads_checked(text, max_depth=3) == json.loads(text)
    assert json_loads_checked(nested_list(5), max_depth=5) == json.loads(nested_list(5))


def test_a_decoder_of_ones_own_is_used_after_the_depth_check() -> None:
    seen: list[str] = []

    def decoder(text: str) -> Any:
        seen.append(text)
        return json.loads(text)

    assert json_loads_checked("[1]", max_depth=1, loads=decoder) == [1]
    with pytest.raises(JSONRefused):
        json_loads_checked(nested_list(50), max_depth=1, loads=decoder)
    assert seen == ["[1]"]  # too deep: never handed to the decoder


@pytest.mark.parametrize(
    ("value", "kind", "sentence"),
    [
        ({"a": json.loads(nested_list(5))}, RefusalKind.NESTING, "The value nests lists and objects deeper than 5"),
        ({"a": ["x\x00"]}, RefusalKind.STORAGE, "The value cannot be stored: v.a[0] contains a NUL character"),
        ({"\udfff": 1}, RefusalKind.STORAGE, "The value cannot be stored: a key contains an invalid character"),
    ],
    ids=["too-deep", "nul", "lone-surrogate-key"],
)
def test_decoded_values_are_held_to_the_same_limits(value: Any, kind: RefusalKind, sentence: str) -> None:
    refused = json_value_problem(value, max_depth=5, path="v")

    assert refused is not None and refused.kind == kind
    assert refused.about("The value").startswith(sentence)


def test_a_value_nested_far_beyond_the_recursion_limit_is_measured_without_recursion() -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]

    assert json_nesting_exceeds(value, 100)
    refused = json_value_problem(value, max_depth=100)
    assert refused is not None and refused.kind == RefusalKind.NESTING
    assert json_value_problem({"a": [1, "text", {"b": None}]}, max_depth=3) is None
