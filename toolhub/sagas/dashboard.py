"""The sagas' figure on the admin index's dashboard: the viewer's sagas needing attention, linked to that list."""

import datetime as dt
from typing import Any

from django.urls import reverse

from toolhub.dashboard import Figure
from toolhub.sagas.selectors import sagas_needing_attention

__all__ = ["sagas_attention_figures"]


def sagas_attention_figures(user: Any, since: dt.datetime) -> list[Figure]:
    """How many of the sagas ``user`` may see need an operator now (``since`` unused: a state, not a window).

    One ``COUNT`` on the sagas' ``status`` index, scoped as the sagas list is (``sagas_visible_to``): a failed or
    unknown compensation, or steps held for an operator (a failure the sweep found late), whenever it happened.
    Linked to the sagas list's "needs attention" filter; shown only to whom may view that list.
    """
    if not user.has_perm("sagas.view_saga"):
        return []
    count = sagas_needing_attention(visible_to=user).order_by().count()
    url = reverse("admin:sagas_saga_changelist") + "?attention=yes"
    return [Figure("sagas needing attention", str(count), url)]
