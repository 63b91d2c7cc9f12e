"""``visible_text``'s shortcut for printable ASCII answers exactly as its character-by-character rule."""

import pytest

from toolhub.visible import visible_text


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_character_is_shown_as_the_rule_says(code: int) -> None:
    char = chr(code)
    shown = visible_text(f"a{char}b")
    if char == "\n" or 32 <= code < 127:
        assert shown == f"a{char}b"
    else:  # a control character (tab, a lone carriage return, NUL, DEL...) is written out
        assert shown == f"a\\u{code:04x}b"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("first line\r\nsecond line\n", "first line\r\nsecond line\n"),
        ("cut\r\r\nhere", "cut\\u000d\r\nhere"),
        ("plain " * 1000, "plain " * 1000),
        ("add\u200b", "add\\u200b"),
        ("caf\u00e9", "caf\u00e9"),
    ],
)
def test_line_breaks_long_text_and_non_ascii_keep_their_rule(text: str, shown: str) -> None:
    assert visible_text(text) == shown
