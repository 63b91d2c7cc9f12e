"""A request's address and form fields must be text the database can hold: a NUL in them is refused (400).

Views put path segments and query values into queries (a saga id, ``?tenant=``, the console's list filters);
PostgreSQL refuses a NUL character in any text it is given, so such a request ended in a server error (500).
Django's form fields refuse NUL, but not every value passes through one; checking the address once, before any
view, covers the views that read it raw and those written later. Cheap (the address is short) and needs no
authentication, unlike a body's checks (``toolhub.json_intake``), which wait for the caller to be known.
A form's posted fields are read the same way (the console's forms: "Verify now" put its ``tenant`` field into a
query); Django's CSRF check reads them before any view anyway, and a JSON body is not a form (left to its intake).
A body that cannot be read as the form it claims to be is refused here too, under ``/api/`` in the API's shape
(as DRF's parser refused it before the middleware read it first).

Reading the form comes before authentication, so what it reads is bounded first: a body whose ``Content-Length``
is over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is refused before a byte of it is read (413 under ``/api/``, Django's bad
request page elsewhere). Django bounds a JSON or urlencoded body so already, but not a multipart one: its file parts
are not counted and spill to disk, so an anonymous client could make the server parse megabytes before ``/api/``
answered 401. No toolhub page or API view takes a file, so the bound on the whole body refuses nothing they send.
"""

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError

from toolhub.api.error_pages import body_too_big

__all__ = ["API_PREFIX", "StorableAddressMiddleware", "address_problem", "file_part_refusal"]

#: Where the REST API answers (``toolhub.urls``): its refusals are JSON. Matched on the path below the mount prefix
#: (``path_info``; ``request.path`` holds ``--root-path``'s prefix, where no check of ours then applied).
API_PREFIX = "/api/"

#: What reading ``request.POST`` raises on a body that is not the form it claims to be (Django answers each 400).
_UNREADABLE_FORM = (MultiPartParserError, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent)


def address_problem(request: HttpRequest) -> str | None:
    """Why the request's path, query string or form fields cannot be used (naming which), or ``None``.

    A NUL anywhere cannot go into a query; under ``/api/`` a file part cannot go anywhere.
    """
    if "\x00" in request.path:
        return "The path holds a NUL character."
    for where, fields in (("query parameter", request.GET), ("form field", request.POST)):
        for name, values in fields.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return f"The {where} {name[:50]!r} holds a NUL character."
    if request.path_info.startswith(API_PREFIX) and request.FILES:
        # No API view takes a file; DRF reads this already parsed form, so its parsers never see the part. A file
        # where a serializer takes a dict's values (a run's ``context.<key>``) reached the database: a 500.
        return file_part_refusal(next(iter(request.FILES)))
    return None


def file_part_refusal(name: str) -> str:
    """Why an API form with the file part ``name`` is refused: here for POST, by the API's parser for other methods."""
    return f"The API takes no file uploads (file part {name[:50]!r}); send each field as text, or a JSON body."


class StorableAddressMiddleware:
    """Answers 400 to a path, query string or form field holding a NUL character, or an API form with a file part.

    Under ``/api/`` the answer is the API's documented error shape (``{"detail": ...}``, see
    ``toolhub.api.schema``), elsewhere Django's bad request page.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            _refuse_declared_too_big(request)
            problem = address_problem(request)
        except _UNREADABLE_FORM as exc:
            if not request.path_info.startswith(API_PREFIX):
                raise  # Django's bad request page, as for any view that reads the form
            if isinstance(exc, RequestDataTooBig):
                return body_too_big()  # 413 naming the limit, as a JSON body over it answers
            return JsonResponse({"detail": _unreadable_form(exc)}, status=400)
        if problem is None:
            return self.get_response(request)
        if request.path_info.startswith(API_PREFIX):
            return JsonResponse({"detail": problem}, status=400)
        raise BadRequest(problem)


def _refuse_declared_too_big(request: HttpRequest) -> None:
    """Raise ``RequestDataTooBig`` when the body's declared length is over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, unread."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return  # not a length: the form's parser refuses it (an unreadable form)
    if limit is not None and declared > limit:
        raise RequestDataTooBig(f"The request body is {declared} bytes, over DATA_UPLOAD_MAX_MEMORY_SIZE ({limit}).")


def _unreadable_form(exc: Exception) -> str:
    """Why the body was refused, worded as DRF's parsers word it; a suspicious one is logged as Django logs it."""
    if isinstance(exc, SuspiciousOperation):
        logging.getLogger(f"django.security.{type(exc).__name__}").error(str(exc))
        return f"The request body was refused: {exc}"
    return f"Multipart form parse error - {exc}"
