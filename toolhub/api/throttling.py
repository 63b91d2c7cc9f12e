"""Request throttling: starting runs and deciding approvals are rate-limited per user, by scope."""

from typing import Any

from rest_framework import throttling
from rest_framework.settings import api_settings

__all__ = ["ScopedRateThrottle"]


class ScopedRateThrottle(throttling.ScopedRateThrottle):
    """DRF's scoped throttle, reading ``DEFAULT_THROTTLE_RATES`` when a request comes, not at import.

    DRF binds the rates once, when its module is imported; reading them late lets a changed setting
    (an override in a test, another settings module) apply.
    """

    @property  # type: ignore[override]
    def THROTTLE_RATES(self) -> dict[str, Any]:  # noqa: N802 - the name DRF reads
        return api_settings.DEFAULT_THROTTLE_RATES
