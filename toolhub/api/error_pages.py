"""Django's own error pages for requests under ``/api/``: JSON like every other API answer, not HTML.

A URL the router cannot match (``/api/v1/runs/not-a-uuid/``: the path converter refuses it before DRF sees the
request), a bad request Django refuses itself (a disallowed host, a malformed body) and an unhandled server error
never reach DRF's exception handler; an API client would get Django's HTML page. The admin keeps its pages.
"""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.exceptions import bad_request, server_error

__all__ = ["bad_request_page", "not_found_page", "server_error_page"]

_API_PREFIX = "/api/"


def not_found_page(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith(_API_PREFIX):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def bad_request_page(request: HttpRequest, exception: Exception, *args: Any, **kwargs: Any) -> HttpResponse:
    if request.path.startswith(_API_PREFIX):
        return bad_request(request, exception, *args, **kwargs)
    return defaults.bad_request(request, exception)


def server_error_page(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    if request.path.startswith(_API_PREFIX):
        return server_error(request, *args, **kwargs)
    return defaults.server_error(request)
