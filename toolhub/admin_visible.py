r"""Every value the admin draws from a row's field goes through ``toolhub.visible.shown``.

A refused call of ``add\u200b`` is stored as such; drawn raw in a list, a change page, the desk or the audit
console it reads as ``add``, and an auditor filtering on ``add`` is misled. Django's admin draws list cells and
read-only fields through ``display_for_field`` / ``display_for_value`` (``django.contrib.admin.utils``), imported
by its list tags and form helpers: :func:`install` wraps them there, once, so the escape is applied at the display
and nowhere else (stored values, hashes and forms' inputs are untouched). Tables built by ``admin_table`` apply
the same helper to their cells (the ``visible`` filter).
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from toolhub.visible import shown

__all__ = ["install"]


def _visible(display: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(display, "_toolhub_visible", False):
        return display

    @wraps(display)
    def drawn(*args: Any, **kwargs: Any) -> Any:
        return shown(display(*args, **kwargs))

    drawn._toolhub_visible = True  # type: ignore[attr-defined]
    return drawn


def install() -> None:
    """Wrap the admin's display functions where its list tags and read-only fields call them (idempotent)."""
    from django.contrib.admin import helpers
    from django.contrib.admin.templatetags import admin_list

    for module in (admin_list, helpers):
        for name in ("display_for_field", "display_for_value"):
            if hasattr(module, name):
                setattr(module, name, _visible(getattr(module, name)))
