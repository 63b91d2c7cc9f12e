"""Django's own error pages for requests under ``/api/``: JSON like every other API answer, not HTML.

A URL the router cannot match (``/api/v1/runs/not-a-uuid/``: the path converter refuses it before DRF sees the
request), a bad request Django refuses itself (a disallowed host, a malformed body) and an unhandled server error
never reach DRF's exception handler; an API client would get Django's HTML page. The admin keeps its pages.
A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (Django refuses it when DRF or a form reads it) answers 413 in the API's
``{"detail": ...}`` shape, naming the limit (``body_too_big``): the client learns why and what to send instead.
"""

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.exceptions import bad_request, server_error

__all__ = ["bad_request_page", "body_too_big", "not_found_page", "server_error_page"]

#: Matched on ``path_info``: ``request.path`` holds the mount prefix (``--root-path``), and the API's 404s were HTML.
_API_PREFIX = "/api/"


def not_found_page(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path_info.startswith(_API_PREFIX):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def body_too_big() -> JsonResponse:
    """413 for a request body larger than Django reads: the limit and its setting, nothing done."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return JsonResponse(
        {
            "detail": f"The request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE ({limit:,} bytes); nothing was "
            "done. Send less (large results and files go through a tool's artifact, not a request)."
        },
        status=413,
    )


def bad_request_page(request: HttpRequest, exception: Exception, *args: Any, **kwargs: Any) -> HttpResponse:
    if request.path_info.startswith(_API_PREFIX):
        if isinstance(exception, RequestDataTooBig):
            return body_too_big()
        return bad_request(request, exception, *args, **kwargs)
    return defaults.bad_request(request, exception)


def server_error_page(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    if request.path_info.startswith(_API_PREFIX):
        return server_error(request, *args, **kwargs)
    return defaults.server_error(request)
