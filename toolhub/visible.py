"""Text as a page must draw it: characters a browser draws as nothing (or that reorder text) written out.

One helper for every page that shows text a model, a remote server or a user chose: remote definitions under
review, and the identifiers of the console (tool names, idempotency keys, actors) in lists, change pages, the
desk and the audit console (``toolhub.admin_visible``). Only the display changes; stored values and the
trail's hashes stay as written.
"""

import unicodedata

from django.utils.safestring import SafeData, mark_safe

__all__ = ["lookalike_problem", "shown", "shown_markup", "visible_line", "visible_text"]


def visible_text(text: str) -> str:
    r"""``text`` with the characters a page draws as nothing written out as escapes (``\u200b``, ``\U000e0049``).

    Zero-width and bidirectional controls, Unicode tag characters ("ASCII smuggling"), control, private-use and
    line-separator characters (categories Cf, Cc, Co, Cs, Zl, Zp; a newline stays one, and so does a browser's
    ``\r\n``: a textarea's line breaks arrive so, and Django keeps them), and the other default
    ignorable ones (variation selectors, Hangul fillers): a model reads them, an
    administrator reviewing a definition must see them too. The rest stays readable (accents, CJK).
    """
    if text.isascii() and text.replace("\r\n", "").replace("\n", "").isprintable():
        return text  # printable ASCII holds nothing a page draws as nothing: most text, read in C, not per character
    return "".join(
        char if char == "\n" or not _invisible(char) or text.startswith("\r\n", index) else _escaped(char)
        for index, char in enumerate(text)
    )


def visible_line(text: str) -> str:
    r"""``text`` as one line of plain text (an e-mail's field): :func:`visible_text` with its line breaks written out.

    A value a model chose (a rule's reason quoting its arguments) must not start lines of its own in a message
    people trust, such as a second "open it here: <link>".
    """
    return visible_text(text).replace("\r", "\\u000d").replace("\n", "\\u000a")


_INVISIBLE = frozenset({"Cf", "Cc", "Co", "Cs", "Zl", "Zp"})
#: Unicode's Default_Ignorable_Code_Point ranges outside those categories (variation selectors, the combining
#: grapheme joiner, Hangul fillers...), which ``unicodedata`` does not expose: a page draws them as nothing.
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def _invisible(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char) in _INVISIBLE or any(low <= code <= high for low, high in _IGNORABLE)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


#: The scripts a name may mix (Unicode's "highly restrictive" level, UTS #39 5.2): Latin beside the scripts of
#: Japanese, Chinese or Korean writing, whose letters look like none of Latin's, and nothing else.
_MIXES_ALLOWED = (
    frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "CJK", "BOPOMOFO"}),
    frozenset({"LATIN", "CJK", "HANGUL"}),
)
#: Letters and digits whose character name does not start with their script's: the prolonged sound mark (``ユーキ``),
#: the iteration mark (``佐々木``) and Suzhou numerals are Japanese or Chinese, a modifier letter (the okina of
#: ``oʻahu``) and an ASCII digit are every script's, (extended) Arabic-Indic digits are Arabic.
_SCRIPT_OF_NAME = {
    "KATAKANA-HIRAGANA": "KATAKANA",
    "IDEOGRAPHIC": "CJK",
    "HANGZHOU": "CJK",
    "MODIFIER": "",
    "DIGIT": "",
    "ARABIC-INDIC": "ARABIC",
    "EXTENDED": "ARABIC",
}


def _scripts(name: str) -> set[str]:
    """The scripts of ``name``'s letters and digits, read in its compatibility form (``Ｔａｒｏ１`` is ``Taro1``).

    Another script's digit reads as a Latin one (a Bengali ``\u09e6`` as ``0``), as its letters do.
    """
    words = (unicodedata.name(char, "").split(" ")[0] for char in unicodedata.normalize("NFKC", name) if char.isalnum())
    return {script for script in (_SCRIPT_OF_NAME.get(word, word) for word in words) if script}


def lookalike_problem(name: str) -> str | None:
    """Why ``name`` (an identifier people tell each other apart by) could read as another one; ``None`` if it can't.

    Written out at display (:func:`visible_text`) is no defence where a name is read elsewhere (an e-mail, a
    terminal, the trail's ``actor``): a name holding a character drawn as nothing (a Hangul filler), or mixing
    look-alike letters or digits of two scripts (a Cyrillic ``\u0430`` or a Bengali ``\u09e6`` among Latin ones), is
    refused where it is chosen. A name in one script (``zoë``, ``Ярослав``), or mixing only as Japanese, Chinese and
    Korean names do (``佐々木``, ``ユーキ``, ``taro_田中``), is fine here; a name that reads as an existing account's
    (``ɑlice``, an all-Cyrillic copy) is refused by ``toolhub.confusable_names``.
    """
    if visible_text(name) != name:
        return f"it holds characters a page draws as nothing (invisible): {visible_text(name)}"
    scripts = _scripts(name)
    if len(scripts) > 1 and not any(scripts <= allowed for allowed in _MIXES_ALLOWED):
        return f"it mixes letters or digits of several scripts ({', '.join(sorted(scripts))}), which look alike"
    return None


def shown(value: object) -> object:
    """``value`` for a page: text (not already safe HTML) through :func:`visible_text`, anything else as it is."""
    if isinstance(value, str) and not isinstance(value, SafeData):
        return visible_text(value)
    return value


def shown_markup(value: object) -> object:
    """``value`` for a page, safe HTML too (a message built by ``format_html``): its text written out, still safe.

    The escapes are a backslash, ``u`` and hex digits, which make no markup; anything not text is as it is.
    """
    if isinstance(value, SafeData):
        return mark_safe(visible_text(str(value)))  # noqa: S308 - only invisible characters change, to ASCII text
    return shown(value)
