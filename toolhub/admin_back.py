"""Where a console form's POST returns: the page it was on, when that is one of this site's."""

from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

__all__ = ["form_page"]


def form_page(request: HttpRequest) -> str:
    """The posted ``next`` when it is a page of this site (never another site's); else the list of calls."""
    # The address checked is the address returned: Django checks ``next`` stripped of surrounding spaces.
    target: Any = request.POST.get("next", "").strip()
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return str(target)
    return reverse("admin:toolhub_toolcall_changelist")
