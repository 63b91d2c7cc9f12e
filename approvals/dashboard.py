"""The approvals' figures on the admin index's dashboard: approval latency p50 / p95 over its window."""

import datetime as dt
import math
from typing import Any

from approvals.models import ApprovalRequest, ApprovalStatus
from toolhub.tenancy import scoped

__all__ = ["approval_latency_figures"]


def _percentile(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    index = max(0, min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1))
    return ordered[index]


def _seconds(value: float) -> str:
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def approval_latency_figures(user: Any, since: dt.datetime) -> list[tuple[str, str]]:
    """Seconds from request to decision of the requests made since ``since`` and decided, in ``user``'s tenants.

    Reads the window on the ``created_at`` index; the decided requests of one window are few.
    """
    decided = scoped(ApprovalRequest.objects.all(), user).filter(
        created_at__gte=since,
        decided_at__isnull=False,
        status__in=[ApprovalStatus.APPROVED, ApprovalStatus.REJECTED],
    )
    waits = sorted(
        (decided_at - created_at).total_seconds()
        for created_at, decided_at in decided.values_list("created_at", "decided_at")
    )
    if not waits:
        return [("approval latency p50 / p95", "-")]
    return [
        ("approval latency p50 / p95", f"{_seconds(_percentile(waits, 0.5))} / {_seconds(_percentile(waits, 0.95))}")
    ]
