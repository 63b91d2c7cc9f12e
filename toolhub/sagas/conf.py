"""Tunables of the sagas: ``settings.TOOLHUB[name]``, else the environment ``TOOLHUB_<name>``, else the default."""

import os
from typing import Any

from django.conf import settings

__all__ = ["DEFAULTS", "saga_setting", "retry_delay_seconds"]

DEFAULTS: dict[str, Any] = {
    # Attempts of one compensation (each retry runs the same call again, so its idempotency key is stable).
    "SAGA_MAX_ATTEMPTS": 5,
    # Seconds before the first retry of a failed compensation; doubled for each further attempt.
    "SAGA_RETRY_BASE_SECONDS": 5.0,
    # Longest wait between two attempts.
    "SAGA_RETRY_MAX_SECONDS": 600.0,
}


def saga_setting(name: str) -> Any:
    """Return a saga tunable, typed like its documented default."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown saga setting {name!r}; known: {', '.join(sorted(DEFAULTS))}")
    configured = getattr(settings, "TOOLHUB", {})
    if name in configured:
        return configured[name]
    from_env = os.environ.get(f"TOOLHUB_{name}")
    if from_env is not None:
        return type(DEFAULTS[name])(from_env)
    return DEFAULTS[name]


def retry_delay_seconds(attempt: int) -> float:
    """Exponential backoff after the ``attempt``-th failed attempt (1-based), capped."""
    base = float(saga_setting("SAGA_RETRY_BASE_SECONDS"))
    cap = float(saga_setting("SAGA_RETRY_MAX_SECONDS"))
    return min(cap, base * (2 ** max(0, attempt - 1)))
