"""The console's session on the REST API: taken only while its user may still sign in to the console.

Only the console's login issues a session, and it signs in staff only (Django's admin form). The console refuses a
session at once when its user stops being staff (``AdminSite.has_permission``), but DRF's ``SessionAuthentication``
asks only ``is_active``: the cookie of a demoted operator went on listing, requesting and approving their tenants'
calls through ``/api/v1/`` for the rest of the session's life. Here the API asks what the console asks. API access
without the console is what an administrator grants with an API token, not what a leftover cookie keeps.
"""

from typing import Any

from django.contrib import admin
from drf_spectacular.authentication import SessionScheme
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request

__all__ = ["ConsoleSessionAuthentication"]


class ConsoleSessionAuthentication(SessionAuthentication):
    """DRF's session authentication (CSRF enforced), for users the console's site would let in now."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        authenticated = super().authenticate(request)
        if authenticated is None or not admin.site.has_permission(request._request):
            return None
        return authenticated


class ConsoleSessionScheme(SessionScheme):  # type: ignore[misc]
    """The OpenAPI schema's ``cookieAuth``, as for DRF's session authentication (registered by being defined)."""

    target_class = "toolhub.api.sessions.ConsoleSessionAuthentication"
