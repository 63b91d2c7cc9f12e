"""One hidden field for every admin page bound to the rows it shows: their marks, however many rows.

A confirmation page (and a saga page's Retry) carries what it showed of each row, so that the action acts on that
or refuses. Django refuses a POST of more than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields with a bare "Bad Request
(400)": a field per row made a page of a few hundred rows impossible to confirm. Every such page carries its marks
in the one ``marks`` field instead, separated by spaces (a mark holds none), and reads them back here.
"""

from collections import Counter
from collections.abc import Iterable

from django.http import HttpRequest

__all__ = ["MARKS_FIELD", "marks_field", "page_marks", "row_mark", "row_bindings"]

#: The hidden field holding every mark of the page, separated by spaces.
MARKS_FIELD = "marks"

#: Between a row's primary key and the parts of what the page showed of it (``row_mark``).
_SEPARATOR = ":"


def marks_field(marks: Iterable[str]) -> dict[str, str]:
    """The hidden field of a page bound to what it shows: its marks (none empty, none holding a space)."""
    listed = list(marks)
    for mark in listed:
        if not mark or any(character.isspace() for character in mark):
            raise ValueError(f"A mark is one non-empty word, not {mark!r}: the page could not carry it.")
    return {MARKS_FIELD: " ".join(listed)}


def page_marks(request: HttpRequest) -> list[str]:
    """The marks the page carried (``marks_field``): what the operator read, to which the action is bound."""
    return request.POST.get(MARKS_FIELD, "").split()


def row_mark(pk: object, *shown: str) -> str:
    """One row's mark for ``row_bindings``: its primary key and each part of what the page showed of it."""
    parts = [str(pk), *shown]
    if any(_SEPARATOR in part for part in parts):
        raise ValueError(f"A part of a row's mark holds no {_SEPARATOR!r}: {parts!r}.")
    return _SEPARATOR.join(parts)


def row_bindings(request: HttpRequest, *, parts: int) -> dict[str, tuple[str, ...]]:
    """What the page showed of each row (``row_mark`` with ``parts`` parts), by primary key as text.

    A mark that is garbled (another number of parts) or names a row that another mark names too is left out: that
    row's binding is unknown, and the caller refuses it as a row the page did not list.
    """
    split = [mark.split(_SEPARATOR) for mark in page_marks(request)]
    named = Counter(mark[0] for mark in split)
    return {mark[0]: tuple(mark[1:]) for mark in split if len(mark) == parts + 1 and mark[0] and named[mark[0]] == 1}
