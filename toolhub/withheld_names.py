"""A shared row's name as the admin's viewer may read it: one they may not see is named by its kind only.

A table each tenant sees only part of (tool groups bound to some tenants, ``toolhub.admin_relations.SharedInPart``)
is withheld wherever a page names one of its rows through a field. A row's own name may name it too (a grant's is
"allow group <tool group> to globex"), and Django draws that name in the list, the select box's label, titles,
breadcrumbs and messages, all from ``str()``. So the shared row's ``__str__`` asks :func:`withheld_name` first:
while an admin page answers (``ToolhubAdminSite.admin_view`` binds the viewer with :func:`names_withheld`), a row
the viewer may not see is named as the columns name it. Outside a page (the API, workers, commands) nothing is bound,
except where a text is composed for one tenant's readers (a governance event in that tenant's chain).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["Namer", "names_withheld", "withheld_label", "withheld_name"]

#: What a page calls a row its viewer may not see; ``None``: its own name.
Namer = Callable[[Any], str | None]

_namer: ContextVar[Namer | None] = ContextVar("toolhub_withheld_namer", default=None)


def withheld_label(model: Any) -> str:
    """What a reader reads for a row of ``model`` they may not see: its kind, never its name."""
    return f"a {model._meta.verbose_name} of another tenant"


def withheld_name(row: Any) -> str | None:
    """What the current page's viewer reads instead of ``row``'s name, or ``None`` (its name; no page answering)."""
    namer = _namer.get()
    return None if namer is None else namer(row)


@contextmanager
def names_withheld(namer: Namer) -> Iterator[None]:
    """Names rows by ``namer`` while the block runs (a page's view and the rendering of its template)."""
    token = _namer.set(namer)
    try:
        yield
    finally:
        _namer.reset(token)
