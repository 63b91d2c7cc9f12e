"""Request throttling: starting, retrying and rolling back runs, and deciding approvals, are rate-limited per user.

The admin's decision views have no DRF throttle: they call :func:`throttle_wait` with the same scope,
so a decision counts against one rate (and one cache key) whether it comes from the API or the admin.
The MCP server, outside Django's requests, counts its calls with :func:`user_throttle_wait` likewise.
"""

from typing import Any

from django.http import HttpRequest
from rest_framework import throttling
from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings

__all__ = ["ScopedRateThrottle", "throttle_wait", "user_throttle_wait"]


class ScopedRateThrottle(throttling.ScopedRateThrottle):
    """DRF's scoped throttle, reading ``DEFAULT_THROTTLE_RATES`` when a request comes, not at import.

    DRF binds the rates once, when its module is imported; reading them late lets a changed setting
    (an override in a test, another settings module) apply. Scopes limit writes only: a view that
    also answers GET (a rollback's progress) is read as often as wanted.
    """

    @property  # type: ignore[override]
    def THROTTLE_RATES(self) -> dict[str, Any]:  # noqa: N802 - the name DRF reads
        return api_settings.DEFAULT_THROTTLE_RATES

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)


class _Scope:
    """Stands in for a DRF view: all the throttle reads of it is ``throttle_scope``."""

    def __init__(self, scope: str) -> None:
        self.throttle_scope = scope


def throttle_wait(request: HttpRequest, scope: str) -> float | None:
    """Count one request of ``scope`` for its user; ``None`` when allowed, else the seconds to wait.

    For views outside DRF (the admin); the counter is the one the API's throttle keeps for the scope.
    """
    throttle = ScopedRateThrottle()
    if throttle.allow_request(request, _Scope(scope)):
        return None
    return throttle.wait() or 0.0


class _UserWrite:
    """Stands in for a request: a write (``POST``) by ``user``, all the throttle reads of an authenticated one."""

    method = "POST"
    META: dict[str, str] = {}

    def __init__(self, user: Any) -> None:
        self.user = user


def user_throttle_wait(user: Any, scope: str) -> float | None:
    """Count one write of ``scope`` for an authenticated ``user`` outside HTTP (MCP), as :func:`throttle_wait` does."""
    return throttle_wait(_UserWrite(user), scope)  # type: ignore[arg-type]
