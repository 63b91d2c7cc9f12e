r"""Every value the admin draws from a row's field goes through ``toolhub.visible.shown``.

A refused call of ``add\u200b`` is stored as such; drawn raw in a list, a change page, the desk or the audit
console it reads as ``add``, and an auditor filtering on ``add`` is misled. Django's admin draws list cells and
read-only fields through ``display_for_field`` / ``display_for_value`` (``django.contrib.admin.utils``), imported
by its list tags and form helpers: :func:`install` wraps them there, once, so the escape is applied at the display
and nowhere else (stored values, hashes and forms' inputs are untouched). Tables built by ``admin_table`` apply
the same helper to their cells (the ``visible`` filter).

A row drawn beside another one is written out the same way: a foreign key's list cell and read-only field (Django
formats the related row itself with ``format_html``), a read-only method's text and a many-to-many's names (drawn
through ``linebreaksbr``, not ``display_for_value``), a select's options (``ModelChoiceIterator.choice``: the label,
never the value a form submits), the row named beside a raw id box (``label_and_url_for_value``, the
scoped box's too) and a list checkbox's ``aria-label`` (``ModelAdmin.action_checkbox``). List
filters draw theirs through ``admin/filter.html``, popups' answers through ``toolhub.admin_drawn``.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db.models import Model
from django.utils.html import escape
from django.utils.safestring import SafeData

from toolhub.admin_drawn import DrawnRow
from toolhub.visible import shown, visible_text

__all__ = ["install"]

_WRAPPED = "_toolhub_visible"


def _once(
    wrapper: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``wrapper`` applied at most once to a function: ``install`` may run again (tests, a reload) without stacking."""

    @wraps(wrapper)
    def applied(function: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(function, _WRAPPED, False):
            return function
        drawn = wrapper(function)
        setattr(drawn, _WRAPPED, True)
        return drawn

    return applied


@_once
def _visible(display: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(display)
    def drawn(*args: Any, **kwargs: Any) -> Any:
        return shown(display(*args, **kwargs))

    return drawn


@_once
def _rows_visible(format_html: Callable[..., Any]) -> Callable[..., Any]:
    """``format_html`` drawing a row it is handed (a related row: ``str(row)``) written out.

    Escaped whatever ``str(row)`` is, as Django's ``conditional_escape`` escapes a row (it has no ``__html__``): a
    row whose ``__str__`` answers safe HTML is drawn as text there, not as markup.
    """

    def text(value: Any) -> Any:
        return escape(visible_text(str(value))) if isinstance(value, Model) else value

    @wraps(format_html)
    def drawn(format_string: str, *args: Any, **kwargs: Any) -> Any:
        return format_html(format_string, *map(text, args), **{key: text(value) for key, value in kwargs.items()})

    return drawn


@_once
def _text_visible(filter_: Callable[..., Any]) -> Callable[..., Any]:
    """A filter (``linebreaksbr``) reading its value written out (safe HTML as it is: its text was drawn already).

    Read as Django's ``stringfilter`` reads it, ``str(value)`` first: a lazy string of safe HTML is safe HTML too.
    """

    @wraps(filter_)
    def drawn(value: Any, *args: Any, **kwargs: Any) -> Any:
        text = str(value)
        return filter_(text if isinstance(text, SafeData) else visible_text(text), *args, **kwargs)

    return drawn


@_once
def _label_visible(choice: Callable[..., Any]) -> Callable[..., Any]:
    """``ModelChoiceIterator.choice`` whose label (``label_from_instance``, an override's too) is written out."""

    @wraps(choice)
    def drawn(self: Any, obj: Any) -> tuple[Any, Any]:
        value, label = choice(self, obj)
        return value, shown(label)

    return drawn


@_once
def _raw_id_label_visible(label_and_url: Callable[..., Any]) -> Callable[..., Any]:
    """``ForeignKeyRawIdWidget.label_and_url_for_value`` whose label (the row named beside the box) is written out."""

    @wraps(label_and_url)
    def drawn(self: Any, value: Any) -> tuple[Any, Any]:
        label, url = label_and_url(self, value)
        return shown(label), url

    return drawn


@_once
def _row_visible(column: Callable[..., Any]) -> Callable[..., Any]:
    """A list column of ``(admin, row)`` drawing the row's name written out (its description kept by ``wraps``)."""

    @wraps(column)
    def drawn(self: Any, obj: Any) -> Any:
        return column(self, DrawnRow(obj) if isinstance(obj, Model) else obj)

    return drawn


def install() -> None:
    """Wrap the admin's display functions where its list tags and read-only fields call them (idempotent)."""
    from django.contrib.admin import ModelAdmin, helpers
    from django.contrib.admin.templatetags import admin_list
    from django.contrib.admin.widgets import ForeignKeyRawIdWidget
    from django.forms.models import ModelChoiceIterator

    for module in (admin_list, helpers):
        for name in ("display_for_field", "display_for_value"):
            if hasattr(module, name):
                setattr(module, name, _visible(getattr(module, name)))
        module.format_html = _rows_visible(module.format_html)  # type: ignore[attr-defined]
    # A read-only field's last step: a method's text, a many-to-many's joined names, a row without a page
    helpers.linebreaksbr = _text_visible(helpers.linebreaksbr)  # type: ignore[attr-defined]
    ModelChoiceIterator.choice = _label_visible(ModelChoiceIterator.choice)  # type: ignore[method-assign]
    ForeignKeyRawIdWidget.label_and_url_for_value = _raw_id_label_visible(  # type: ignore[method-assign]
        ForeignKeyRawIdWidget.label_and_url_for_value
    )
    ModelAdmin.action_checkbox = _row_visible(ModelAdmin.action_checkbox)  # type: ignore[method-assign]
