"""Review of 2026-12-05 (dc): the admin deletions' trail, approver groups kept, removed tools' unknown steps held,
paused SDK runs read-only and editable lists scoped (f4a4013, f05fe79, d5d84f3, 7d89a74, f8f5eb0, bb39c86,
64e5c0a, dec0c61), reviewed again.

Each test fails on the reviewed code (main at a677711) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A deletion's cascade that empties a governed row's link (``SET_NULL``) changed that row with no event: deleting a
   Django group that a tool group names as its escalation group emptied the tool group's ``escalation_group`` (its
   fallback approvers gone), and the trail held only the group's own deletion. ``GovernanceAudited`` recorded the
   rows the collector deletes, not those it updates (``Collector.field_updates``). Now each governed row the
   cascade updates is a ``governance.changed`` event, as its own page records a change (before and after).

Checked and holding (no test here):

- No REST endpoint deletes anything (no ``destroy`` / ``DELETE`` views); deletions are the admin's only.
- Which pages tenant-scoped staff may delete on (memberships, grants, approval rules, agents, remote MCP
  credentials, the demo's rows): none of their rows has a cascade into another tenant's rows; an agent's runs are
  ``PROTECT`` and are created in the agent's tenant only (``run_start``), so the confirmation page's protected list
  names the tenant's own runs unless a boundary-crosser moved the agent (see the report).
- Tenants, users, roles, tool groups, providers, tokens and remote servers are deleted by boundary-crossers only
  (``CrossTenantChangesOnly`` / ``CrossTenantOnly``); the cascaded rows go each to their own tenants' chains.
- A Django group named by a pending request's ``further_restrictions`` (JSON ids) and deleted after its tool group
  moved to another group: the id names no group any more, so nobody meets that restriction (``_holds``) and the
  request waits until it expires: closed, not open. Ids are not reused (PostgreSQL sequences, SQLite AUTOINCREMENT).
"""

import pytest
from django.contrib.auth.models import Group, User

from tests.helpers import console
from toolhub.models import AuditEvent, ToolGroup

pytestmark = pytest.mark.django_db


def test_a_tool_groups_escalation_group_emptied_by_a_deletion_is_in_the_trail(admin_user: User) -> None:
    """Found: deleting the Django group 'night-shift' emptied the tool group payments' escalation group (its
    fallback approvers) and the trail recorded the group's deletion only. Expect: a ``governance.changed`` event for
    payments with its ``escalation_group_id`` before and after."""
    # given payments, escalating to night-shift
    night = Group.objects.create(name="night-shift")
    payments = ToolGroup.objects.create(name="payments", escalation_group=night, escalate_after_seconds=60)

    # when a superuser deletes night-shift in the admin
    response = console(admin_user).post(f"/admin/auth/group/{night.pk}/delete/", {"post": "yes"})

    # then payments no longer escalates, and the trail says so
    assert response.status_code == 302
    payments.refresh_from_db()
    assert payments.escalation_group_id is None
    changed = [
        event.payload
        for event in AuditEvent.objects.filter(event_type="governance.changed")
        if event.payload["model"] == "toolhub.toolgroup"
    ]
    assert [item["changes"] for item in changed] == [{"escalation_group_id": {"before": night.pk, "after": None}}], (
        changed
    )
