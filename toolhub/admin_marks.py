"""One hidden field for every admin page bound to the rows it shows: their marks, however many rows.

A confirmation page (and a saga page's Retry) carries what it showed of each row, so that the action acts on that
or refuses. Django refuses a POST of more than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields with a bare "Bad Request
(400)": a field per row made a page of a few hundred rows impossible to confirm. Every such page carries its marks
in the one ``marks`` field instead, separated by spaces (a mark holds none), and reads them back here.

Two kinds of binding. A page acting on each selected row alone (approve these, accept those) carries each row's mark
(``row_mark``, read back by ``row_bindings``): one per selected row, bounded by ``rows_per_confirmation``. A page
acting on a set, all or nothing (retry or resolve every compensation needing attention of the selected sagas),
lists rows that grow with the data, not with the selection: their marks could pass ``DATA_UPLOAD_MAX_MEMORY_SIZE``
and the confirming POST get a bare 400. Such a page carries one digest of the marks it listed (``seen_field``);
the service recomputes the digest of the marks of what it holds under its locks (``seen_digest``) and refuses
when they differ. The operator still confirms exactly what they read (a SHA-256 does not match another set), in a
field of constant size, so a set too large to post back does not exist; refusing such pages up front instead would
leave a saga of many compensations with no way to be retried or resolved from the console.
"""

import hashlib
from collections import Counter
from collections.abc import Iterable

from django.http import HttpRequest

__all__ = [
    "MARKS_FIELD",
    "marks_field",
    "page_marks",
    "page_seen",
    "row_bindings",
    "row_mark",
    "seen_digest",
    "seen_field",
]

#: The hidden field holding every mark of the page, separated by spaces.
MARKS_FIELD = "marks"

#: Between a row's primary key and the parts of what the page showed of it (``row_mark``).
_SEPARATOR = ":"


def _words(marks: Iterable[str]) -> list[str]:
    """The marks, each checked to be one non-empty word (so that joined by spaces they read back the same)."""
    listed = list(marks)
    for mark in listed:
        if not mark or any(character.isspace() for character in mark):
            raise ValueError(f"A mark is one non-empty word, not {mark!r}: the page could not carry it.")
    return listed


def marks_field(marks: Iterable[str]) -> dict[str, str]:
    """The hidden field of a page bound to each row it shows: its marks (none empty, none holding a space)."""
    return {MARKS_FIELD: " ".join(_words(marks))}


def seen_digest(marks: Iterable[str]) -> str:
    """One word for a set of marks, whatever their order and number: it differs when any mark does."""
    return hashlib.sha256("\n".join(sorted(_words(marks))).encode()).hexdigest()


def seen_field(marks: Iterable[str]) -> dict[str, str]:
    """The hidden field of a page bound to the set of rows it shows, all or nothing: the digest of their marks."""
    return {MARKS_FIELD: seen_digest(marks)}


def page_seen(request: HttpRequest) -> str:
    """The digest the page carried (``seen_field``), compared with ``seen_digest`` of what the action holds."""
    return request.POST.get(MARKS_FIELD, "")


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
