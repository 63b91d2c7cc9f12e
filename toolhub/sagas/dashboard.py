"""The sagas' figures on the admin index's dashboard: the viewer's sagas needing attention, and the sweep held back."""

import datetime as dt
from typing import Any

from django.urls import reverse
from django.utils import timezone

from toolhub.dashboard import Figure
from toolhub.sagas.selectors import sagas_needing_attention
from toolhub.sagas.sweep_marks import holding_back
from toolhub.sagas.unheard import ENDED_STEP_MARGIN
from toolhub.tenancy import tenant_scope
from toolhub.visible import visible_text

__all__ = ["sagas_attention_figures"]


def sagas_attention_figures(user: Any, since: dt.datetime) -> list[Figure]:
    """How many of the sagas ``user`` may see need an operator now (``since`` unused: a state, not a window).

    One ``COUNT`` on the sagas' ``status`` index, scoped as the sagas list is (``sagas_visible_to``): a failed or
    unknown compensation, or steps held for an operator (a failure the sweep found late), whenever it happened.
    Linked to the sagas list's "needs attention" filter; shown only to whom may view that list. With it, while a
    session holds the sweep's scans back (``sweep_held_back_figures``), which one.
    """
    if not user.has_perm("sagas.view_saga"):
        return []
    count = sagas_needing_attention(visible_to=user).order_by().count()
    url = reverse("admin:sagas_saga_changelist") + "?attention=yes"
    return [Figure("sagas needing attention", str(count), url), *sweep_held_back_figures(user)]


def sweep_held_back_figures(user: Any) -> list[Figure]:
    """The session holding the sweep's scans back past ``ENDED_STEP_MARGIN`` (``holding_back``), if one does.

    Every tenant's late steps and old failures wait for it, so every viewer of sagas is told how long; the session
    (pid, application, role: the database's, no tenant's) is named to those who cross the tenant boundary, who can
    have it ended or committed; never its query (anyone's data). Nothing when none does (SQLite: never).
    """
    now = timezone.now()
    holder = holding_back(now=now, margin=ENDED_STEP_MARGIN)
    if holder is None:
        return []
    held = "?" if holder.started is None else f"{int((now - holder.started).total_seconds() // 60)} min"
    if not tenant_scope(user).everything:
        return [
            Figure("sagas sweep held back: late steps wait for a database session (platform operators see it)", held)
        ]
    session = f"pid {holder.pid}, application {visible_text(holder.application[:64])!r}"
    if holder.started is None:
        label = (
            f"sagas sweep held back by a write of role {visible_text(holder.role[:64])!r} ({session}) whose start "
            "toolhub may not read: run toolhub's processes as its application role"
        )
    else:
        label = (
            f"sagas sweep held back by a transaction open with writes since {holder.started:%Y-%m-%d %H:%M:%S %Z} "
            f"({session}): late steps wait for it to end (end or commit that session if stuck)"
        )
    return [Figure(label, held)]
