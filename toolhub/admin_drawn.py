r"""A page's own row drawn as its lists draw it: the name in titles, breadcrumbs and questions written out.

Django's templates draw a row's name from ``str(obj)``: the ``<title>``, the heading (``title``, ``subtitle``), the
breadcrumb and the delete question (``original``, ``object``) of every change, history and delete page. A name
holding a bidi control (``report\u202egnp.exe``) reads there as another one, where the lists write it out
(``toolhub.admin_visible``). ``ToolhubAdminSite.admin_view`` hands each page's context through :func:`drawn_context`
once, for every console page; what is stored (the name, ``LogEntry.object_repr``) stays as typed. A popup's answer
(``popup_response_data``) hands its opener the row's name (``obj``), which the opener's select then draws: written
out too, its ``value`` (the key) as it is.
"""

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db.models import Model
from django.http import HttpRequest, HttpResponseBase
from django.template.response import SimpleTemplateResponse

from toolhub.visible import shown, visible_text

__all__ = ["DrawnRow", "drawn_context", "drawn_view"]

#: The text a page's templates draw from its row (``_("Change history: %s") % obj``, ``str(obj)``).
_TEXTS = ("title", "subtitle")
#: The row itself, drawn by ``{{ original|truncatewords }}`` and ``{% blocktranslate with escaped_object=object %}``.
_ROWS = ("original", "object")


class DrawnRow:
    """``row`` for a template: its attributes (``pk``, ``status``) are the row's, its text written out."""

    def __init__(self, row: Model) -> None:
        self._row = row

    def __getattr__(self, name: str) -> Any:
        if name == "_row" or name.startswith("__"):  # a copy or pickle asks before ``__init__`` ran: not the row's
            raise AttributeError(name)
        return getattr(self._row, name)

    def __str__(self) -> str:
        return visible_text(str(self._row))


def drawn_context(context: dict[str, Any]) -> dict[str, Any]:
    """``context`` with the row's text as its lists draw it (plain text only: a lazy or safe title is the code's)."""
    drawn = dict(context)
    for key in _TEXTS:
        if key in drawn:
            drawn[key] = shown(drawn[key])
    for key in _ROWS:
        if isinstance(drawn.get(key), Model):
            drawn[key] = DrawnRow(drawn[key])
    if isinstance(drawn.get("popup_response_data"), str):
        drawn["popup_response_data"] = _popup_drawn(drawn["popup_response_data"])
    return drawn


def _popup_drawn(data: str) -> str:
    """A popup's JSON answer with the name it hands the opener (``obj``) written out."""
    answer = json.loads(data)
    if isinstance(answer, dict) and isinstance(answer.get("obj"), str):
        answer["obj"] = visible_text(answer["obj"])
    return json.dumps(answer)


def drawn_view(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """``view`` whose page, not yet rendered, draws its row through :func:`drawn_context`."""

    @wraps(view)
    def drawn(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        if isinstance(response, SimpleTemplateResponse) and not response.is_rendered and response.context_data:
            response.context_data = drawn_context(dict(response.context_data))
        return response

    return drawn
