"""Review of 2026-12-05 (dm): a regression review of reviews cy and cz (main at 22e0016).

Reviewed: 72de03c, 9f9de8f, aca549e (``governance_recording``'s proxies, ``Binding.shown``, the before-image through
the concrete model's base manager), a3e8606 (review l's ``ALLOWED_FROM``), fd146c7 (``_malformed_row``), 76ba479
(``_hold_as_seen``) and 2e3672b (``_append_cascade_updates``). Each finding's test failed on the reviewed code.

Findings:

1. Review cz checked the posted row ids (``_selected_action``) of ``CommentActionMixin``'s lists only: every other
   list of the console (tenants, memberships, users, roles, grants, tool groups, approval rules, agents, providers,
   ...) still answered a garbled id posted with Django's own ``delete_selected`` with a 500 (``ValueError`` in
   ``filter(pk__in=...)``). The check moved to one place every list passes through: ``ToolhubAdminSite.admin_view``
   wraps each changelist view with ``admin_actions.rows_checked`` (the list again, "'<id>' names no row of this
   list; nothing was done"), and the mixin's own copy is gone.

Checked and holding:

- ``_malformed_row`` / ``malformed_row``: the pk field's ``to_python`` is what ``filter`` applies
  (``get_prep_value``), so a UUID without dashes, upper case, in braces or ``urn:uuid:`` is accepted by both and
  names the row; letters, empty, past the field's range are refused before Django's filter. No list with actions
  has a string pk (the token page, a ``CharField`` key, has no ``CommentActionMixin``; a too long key is refused by
  ``MaxLengthValidator`` and would match nothing anyway). ``select_across=1`` with no ids acts on the filtered list,
  as Django does.
- ``_hold_as_seen``: sagas are locked from the scope's rows at that moment; a compensation of an unlocked saga
  joining the scope afterwards is in ``held`` and so fails the comparison with ``seen``; with ``seen=None``
  (trusted code) each service call locks its own saga (``lock_saga_of``), as before.
- ``governance_recording``: a save through ``Token`` and one through ``TokenProxy`` in one block send one signal
  each (``save_base`` sends with the instance's class): one event per write that changes the row (none for a
  save that changes nothing), named as the token page names it;
  a ``TokenProxy`` queryset ``delete()`` is not fast-deleted while the proxy has a receiver, so it is recorded
  row by row. ``_as_shown`` passes every concrete field to ``from_db`` (a deferred one is loaded first, with its
  stored value). Receivers are global but ignore other threads (``threading.get_ident``) and a block's own
  ``dispatch_uid``; the only proxy installed is DRF's ``TokenProxy`` (default manager unfiltered).
- ``_append_cascade_updates``: rows are read and recorded through ``governing_page``'s model and page, the same as
  ``_append_cascade``'s deletions and the page's own events; rows deleted by the same cascade are left out.
- Review l's ``ALLOWED_FROM`` equals ``ALLOWED``'s names and is checked against ``get_commands()``.

Noted, not changed: events recorded before 72de03c name a token from ``drf_create_token`` ``authtoken.token`` with
id ``[redacted]``, later ones ``authtoken.tokenproxy`` with the user's id: an auditor filtering by model must ask
for both (the trail is append-only). With two governance pages of proxies of one model, ``governing_page`` (cascades,
commands) names the first registered while each page names its own; and ``governance_recording`` gives a proxy that
is not itself watched the binding of the last watched model of its concrete model: none exists today.
"""

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.test import Client

from toolhub.models import AuditEvent, Grant, Tenant

LISTS = [
    "toolhub/tenant",
    "toolhub/tenantmembership",
    "toolhub/grant",
    "toolhub/toolgroup",
    "auth/user",
    "auth/group",
    "approvals/approvalrule",
    "agents_app/agent",
    "agents_app/modelprovider",
]


@pytest.mark.django_db
@pytest.mark.parametrize("page", LISTS)
@pytest.mark.parametrize("bad", ["abc", "", "99999999999999999999999"])
@pytest.mark.parametrize("confirming", [False, True])
def test_delete_selected_with_a_malformed_row_id_answers_with_a_message(
    page: str, bad: str, confirming: bool, tenant: Tenant
) -> None:
    """Found: a garbled ``_selected_action`` posted with Django's ``delete_selected`` to any list that is not a
    ``CommentActionMixin``'s raised in ``filter(pk__in=...)``: a 500. Expect: the list again with "names no row of
    this list; nothing was done", nothing deleted or recorded."""
    root = User.objects.create_superuser("root", "root@example.com", "root-passw0rd-42")
    Group.objects.create(name="operators")
    client = Client(raise_request_exception=False)
    client.force_login(root)
    posted = {"action": "delete_selected", "_selected_action": ["1", bad]}
    posted.update({"post": "yes"} if confirming else {"index": "0"})
    counts = (Tenant.objects.count(), User.objects.count(), Group.objects.count(), Grant.objects.count())
    events = AuditEvent.objects.count()

    answer = client.post(f"/admin/{page}/", posted)

    assert answer.status_code == 302
    said = [str(m) for m in get_messages(answer.wsgi_request)]
    assert any(f"{bad!r} names no row of this list; nothing was done" in m for m in said), said
    assert (Tenant.objects.count(), User.objects.count(), Group.objects.count(), Grant.objects.count()) == counts
    assert AuditEvent.objects.count() == events
