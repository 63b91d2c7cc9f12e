"""Pieces every admin module of toolhub shares: read-only records, JSON display, cross-app links."""

import json
from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

__all__ = ["ReadOnlyMixin", "pretty_json", "admin_link"]


class ReadOnlyMixin:
    """For admins and inlines of records nobody edits from the admin, superusers included."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def pretty_json(value: Any) -> str:
    """Render a JSON value as indented, escaped text for read-only admin fields."""
    return format_html('<pre class="toolhub-json">{}</pre>', json.dumps(value, indent=2, sort_keys=True, default=str))


def admin_link(url_name: str, pk: Any, text: Any) -> str:
    """A link to another admin page, or plain text when that admin is not installed (the core imports no apps)."""
    try:
        url = reverse(url_name, args=[pk])
    except NoReverseMatch:
        return str(text)
    return format_html('<a href="{}">{}</a>', url, text)
