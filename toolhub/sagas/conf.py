"""Tunables of the sagas: the ``SAGA_*`` keys of ``toolhub.conf.ToolhubSettings`` and the backoff they define."""

from typing import Any

from toolhub.conf import toolhub_setting, toolhub_settings

__all__ = ["saga_setting", "retry_delay_seconds"]


def saga_setting(name: str) -> Any:
    """Alias of ``toolhub.conf.toolhub_setting`` for a ``SAGA_*`` key (kept for one release)."""
    if not name.startswith("SAGA_"):
        raise KeyError(f"Unknown saga setting {name!r}; saga settings start with SAGA_.")
    return toolhub_setting(name)


def retry_delay_seconds(attempt: int) -> float:
    """Exponential backoff after the ``attempt``-th failed attempt (1-based), capped."""
    current = toolhub_settings()
    # The exponent is bounded before the product is taken: a float times 2**1025 overflows instead of being capped.
    doublings = min(max(0, attempt - 1), 64)
    return min(current.SAGA_RETRY_MAX_SECONDS, current.SAGA_RETRY_BASE_SECONDS * float(2**doublings))
