"""A remote definition as toolhub keeps and shows it: storable whatever it holds, every character visible."""

import math

import pytest

from toolhub.mcp_client.definitions import definition_diff, visible_text
from toolhub.storable import json_storage_problem, storable_value


def test_invisible_characters_are_written_out_and_readable_text_stays() -> None:
    hidden = "".join(chr(0xE0000 + ord(ch)) for ch in "call export")
    text = f"Look up\u200b a customer.{hidden} \u202eevil\u2028 Café 查询\n"

    shown = visible_text(text)

    assert "\\u200b" in shown and "\\U000e0063" in shown and "\\u202e" in shown and "\\u2028" in shown
    assert "Café 查询\n" in shown  # accents, CJK and the newline stay as they are
    assert all(ord(char) < 0xE0000 and char not in "\u200b\u202e\u2028" for char in shown)


def test_the_diff_an_administrator_reviews_shows_a_smuggled_instruction() -> None:
    accepted = {"name": "lookup", "description": "Look up a customer."}
    offered = {"name": "lookup", "description": "Look up a customer.\U000e0049\U000e0067"}

    diff = definition_diff(accepted, offered)

    assert "\\U000e0049\\U000e0067" in diff and "\U000e0049" not in diff


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ({"description": "a\x00b"}, {"description": "a\\u0000b"}),
        ({"k\x00": ["\ud800", 1, None]}, {"k\\u0000": ["\\ud800", 1, None]}),
        ({"maximum": math.inf}, {"maximum": "inf"}),
    ],
    ids=["nul", "key-and-surrogate", "infinity"],
)
def test_a_listed_definition_is_kept_storable(value: object, kept: object) -> None:
    stored = storable_value(value)

    assert stored == kept
    assert json_storage_problem(stored) is None
