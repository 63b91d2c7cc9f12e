"""toolhub's cookies stay below the prefix it is served under (``uvicorn --root-path``, WSGI's ``SCRIPT_NAME``).

Django sets the session, CSRF, messages and language cookies for ``/`` unless configured otherwise, and the prefix
is known only per request, so below ``/toolhub`` every other app of the host (``/other``) was sent toolhub's
``sessionid`` and ``csrftoken``. A cookie set or deleted for ``/`` is set or deleted for the prefix instead; a path a
deployment configured (``SESSION_COOKIE_PATH = "/shared"``) is kept.

A cookie's path is matched against the path a browser sends, percent-encoded (RFC 6265 5.1.4), and the prefix is
decoded (``/outils-é``, ``/my tools``): the cookies get it encoded as ``reverse`` writes it in every link
(``/outils-%C3%A9``), never the decoded one, which no request path matched (the login's CSRF check failed) or, not
ASCII, made Django's ASGI handler raise on every answer setting a cookie. A ``;`` is encoded too (``%3B``): a
prefix holding one gets cookies it is not sent, never another attribute.

The other way round, another app's same-named cookie for ``/`` reaches toolhub beside its own. Browsers send the
longer path first (RFC 6265 5.4) and Django keeps the last of a repeated name, the other app's: below a prefix the
first is read instead.
"""

from collections.abc import Callable
from http.cookies import SimpleCookie
from urllib.parse import quote

from django.http import HttpRequest
from django.http.cookie import parse_cookie
from django.http.response import HttpResponseBase

__all__ = ["PrefixCookiesMiddleware", "cookie_path_of", "prefix_of"]

#: What ``reverse`` leaves unencoded in a path (RFC 3986's sub-delimiters, ``/~:@``), ``;`` apart: it would end the
#: cookie's ``Path`` and start another attribute.
_PATH_SAFE = "!$&'()*+,=/~:@"


def prefix_of(request: HttpRequest) -> str:
    """The prefix ``request`` was served under, without its trailing slash (``/toolhub``); ``""`` at the root.

    Read from the request (``path`` is the prefix + ``path_info``), as both Django handlers build it, rather than
    from the thread's script prefix.
    """
    return request.path.removesuffix(request.path_info).rstrip("/")


def cookie_path_of(prefix: str) -> str:
    """The ``Path`` of a cookie for ``prefix``: the prefix as a browser sends it (percent-encoded, as in links)."""
    return quote(prefix, safe=_PATH_SAFE)


def _first_of_each_name(header: str) -> dict[str, str]:
    """``Cookie:`` header's values, the first of a repeated name kept (the most specific path)."""
    first: dict[str, str] = {}
    for chunk in header.split(";"):
        for name, value in parse_cookie(chunk).items():
            first.setdefault(name, value)
    return first


def _below(cookies: SimpleCookie, path: str) -> None:
    for morsel in cookies.values():
        if morsel["path"] in ("", "/"):
            morsel["path"] = path


class PrefixCookiesMiddleware:
    """Below a prefix: cookies read first of a name, cookies for ``/`` set for the prefix.

    Outside every middleware that reads or sets a cookie (sessions, CSRF, messages).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        prefix = prefix_of(request)
        if not prefix:
            return self.get_response(request)
        request.COOKIES = _first_of_each_name(request.META.get("HTTP_COOKIE", ""))
        response = self.get_response(request)
        _below(response.cookies, cookie_path_of(prefix))
        return response
