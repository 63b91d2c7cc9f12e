"""Review of 2026-12-05 (j): the console (Django admin) as operators, auditors and developers use it.

Each test fails on the reviewed code (main at df5120f) and states who hit what, where, and what is expected.

Walked through and found working (Chromium through Playwright on the demo, ``load_demo`` plus runs of every
scripted agent and a globex tenant, and Django's test client on PostgreSQL with ``generate_calls 5000`` and
3,000 runs): every page reachable from the index as operator, auditor and developer (a crawl of 250 pages
each: no 500, no traceback but the auditors' own error detail); the approval desk (count, oldest first,
decide, edit then approve, reject with a comment, two approvers, approve/reject selected with their
confirmation pages); a request's page (arguments with sensitive values withheld, the diff, who may still
approve, links to its call and run); a run's transcript with its saga and compensations; cancelling runs and
held calls (a reason asked first); the sagas' retry and resolve pages; the audit events and calls lists with
every filter (tenant choices only the viewer's, tool, risk, kind, agent, user, dates), search by call or run
id, CSV export of the filtered list (sensitive values redacted, timestamps in ISO with their offset), Verify
now (queued, then refused for a minute with a warning) and the chain status; the catalogue, tool groups,
grants and approval rules read-only to tenant staff. Every list and page stays under 150 ms with 5,000
calls, 19,000 events and 3,000 runs (at most 14 queries, none per row).

Seen and not reported: Verify now returns to the page without its query string (deliberate:
``toolhub_console._chain_status`` never echoes a crafted URL); rolling back or retrying a run is offered by the
API only, as the README documents.
"""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from approvals.models import ApprovalRequest
from tests.tenancy.conftest import AcmeData, make_user
from toolhub.models import AuditEvent, Tenant, TenantMembership

pytestmark = pytest.mark.django_db(transaction=True)

#: Links of the admin's own frame (user tools, breadcrumbs), not of what a page shows.
FRAME_LINKS = re.compile(r"^/admin/(logout|password_change|jsi18n)/|^/admin/$")


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],))


def _content_links(html: str) -> set[str]:
    """The admin links inside a page's content: the related rows it names."""
    content = html.split('id="content"', 1)[-1]
    return {href for href in re.findall(r'href="(/admin/[^"?#]+)"', content) if not FRAME_LINKS.search(href)}


def test_a_pages_links_to_related_rows_open_for_the_operator_and_auditor_who_follow_them(
    acme: AcmeData, acme_operator: User, acme_auditor: User, roles: dict[str, Group]
) -> None:
    """Operators and auditors of acme follow the links a call's, a run's, a request's, an agent's and a membership's
    page shows to the rows they name.

    Found: a read-only foreign key is rendered by Django as a link to the related row's change page, whatever
    the viewer may open: the requester (``/admin/auth/user/<id>/change/``) on every call, run and approval
    request, the approver group on a request (``/admin/auth/group/<id>/change/``), the model provider on an
    agent (``/admin/agents_app/modelprovider/<id>/change/``), each answering 403 Forbidden to the roles, who
    hold no ``auth.view_user``, ``auth.view_group`` or provider permission (toolhub/admin_helpers.py,
    ``TenantScopedAdmin``/``CrossTenantChangesOnly``, which swap a withheld relation for text but leave every
    other relation to Django's link).
    Expect: a related row the viewer may not open is named as text; every link on the page opens.
    """
    ApprovalRequest.objects.filter(pk=acme.approval.pk).update(approver_group=roles["operators"])
    membership = TenantMembership.objects.get(user=acme.approval.requested_by)
    pages = [
        f"/admin/approvals/approvalrequest/{acme.approval.pk}/change/",
        f"/admin/agents_app/agentrun/{acme.waiting_run.pk}/change/",
        f"/admin/toolhub/toolcall/{acme.approval.call_id}/change/",
        f"/admin/agents_app/agent/{acme.waiting_run.agent_id}/change/",
        f"/admin/toolhub/tenantmembership/{membership.pk}/change/",
    ]
    for user in (acme_operator, acme_auditor):
        client = Client()
        client.force_login(user)
        dead = []
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, (user.username, page, response.status_code)
            if "agent/" not in page:
                assert "alice" in response.content.decode()  # the requester is still named
            for link in _content_links(response.content.decode()):
                status = client.get(link).status_code
                if status not in (200, 302):
                    dead.append((page, link, status))
        assert dead == [], (user.username, dead)


def test_the_times_an_auditor_reads_say_their_time_zone_and_second(acme: AcmeData, acme_auditor: User) -> None:
    """An auditor of acme reads when things happened on the audit events list, a call's page and a saga's page.

    Found: Django's default format shows a moment as "Dec. 5, 2026, 5:34 a.m.": no time zone and no seconds,
    so a trail whose events all fall in one minute reads as simultaneous, and an auditor outside UTC cannot
    tell which hour; the console's own tables (``toolhub.admin_tables.time_cell``: "2026-12-05 05:34:19") and
    the chain status ("last verified 2026-12-05 05:38") leave the zone out too, while the call's audit
    timeline on the same page says "+00:00".
    Expect: every moment the console shows reads to the second with its time zone ("2026-12-05 05:34:19 UTC").
    """
    client = Client()
    client.force_login(acme_auditor)
    stamp = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")
    pages = {
        "/admin/toolhub/auditevent/": "column-created_at",
        f"/admin/toolhub/toolcall/{acme.approval.call_id}/change/": "field-created_at",
        f"/admin/sagas/saga/{acme.saga.pk}/change/": "saga-audit-events",
    }
    for page, marker in pages.items():
        html = client.get(page).content.decode()
        assert marker in html, page
        shown = html.split(marker, 1)[1][:2000]
        assert stamp.search(shown), (page, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", shown))[:300])


def test_an_auditor_follows_a_run_from_its_audit_event_to_the_runs_whole_trail_and_back(
    acme: AcmeData, acme_auditor: User
) -> None:
    """An auditor of acme reads the ``run.cancelled``-like events of a run, which name no call, and wants the run.

    Found: an audit event's page shows its run id as bare text (``AuditEventAdmin.fields``: ``run_id``), and a
    run's page (``AgentRunAdmin``) links to its calls but not to its audit trail, whose saga and run events
    name no call: the auditor must copy the id into the search box to read the run's trail.
    Expect: the event's run id links to the run's page and to the run's events; the run's page links to them.
    """
    client = Client()
    client.force_login(acme_auditor)
    run = acme.ledger_run
    event = AuditEvent.objects.filter(run_id=run.pk, call_id__isnull=True).order_by("id").first()
    assert event is not None  # the saga's own events
    trail = f"/admin/toolhub/auditevent/?q={run.pk}"
    event_page = client.get(f"/admin/toolhub/auditevent/{event.pk}/change/").content.decode()
    assert f'href="/admin/agents_app/agentrun/{run.pk}/change/"' in event_page
    assert f'href="{trail}"' in event_page
    run_page = client.get(f"/admin/agents_app/agentrun/{run.pk}/change/").content.decode()
    assert f'href="{trail}"' in run_page
    listed = client.get(trail).content.decode()
    assert f"/admin/toolhub/auditevent/{event.pk}/change/" in listed
