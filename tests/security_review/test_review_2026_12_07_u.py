"""Review u (2026-12-07): PostgreSQL plans of one page (a run, a call, its approval, the calls of a tenant, the
trail's export and verification), read under statistics older than the rows (review e's sweep, continued).

Findings (each test failed on the code as found, main at 66111ef, and passes now):

1. The calls changelist (``/admin/toolhub/toolcall/``, an operator of one tenant, ``?tenant=`` filtered or not)
   lists ``-created_at, -id`` over ``toolcall_tenant_created`` ``(tenant, created_at)``, which leaves ``id`` to a
   sort. Under statistics older than the rows (a tenant whose calls came since the last ANALYZE: a new tenant, or
   one that grew fast) the planner estimated the tenant at one row and sorted all of them: the page of acme's 100
   newest calls read every call acme ever made (601 of 601, growing with its whole history). Now the index is
   ``(tenant, created_at, id)`` (toolhub migration ``toolcall_tenant_created_id``, same name, replacing it: no
   extra index on the busiest table): the page is a backward walk of it and reads the page
   (``test_the_calls_page_of_a_tenant_reads_the_page_not_its_whole_history``).

Checked and holding (measured by rows read with a few hundred rows of other data vs none; tests here):
- A run's admin page and ``GET /api/v1/runs/{id}/``: the calls, audit events, approvals and runs they read do not
  grow with 300 calls, runs, events and approval requests of globex and 300 more of acme's other runs
  (``test_a_runs_page_and_its_approval_read_the_run_not_the_tenants_history``).
- One call's trail re-verified on its page (``audit_console.call_timeline``): the call's events by ``call_id``,
  its chain neighbours by ``(chain, seq)``, its chains' heads; no other call's events are read (same test).
- The approval history of one call (``/admin/approvals/approvalrequest/{id}/change/``: the request, its decisions
  and rounds): reads the request's own rows (same test).
- A tenant's trail export (``audit_export_open`` + ``audit_export_lines``, all of it and ``since`` a time) and the
  tenant's verification (``audit_trail_verify(tenant=...)``, chains then the stored checkpoints' heads): no event
  of globex's chains is read, 400 of them or none (``test_a_tenants_export_and_verification_read_no_other_chain``).
  A verification reads its tenant's chains whole by design (it recomputes every hash); the checkpoint side reads
  heads in the tenant's chain range and the named head events by ``(chain, seq)``.

Measured, not changed (statistics-only, hold once ANALYZEd):
- Lookups by primary key with the tenant scope (a call's admin page, ``GET /api/v1/calls/{id}/``,
  ``GET /api/v1/approvals/{id}/``) may take the tenant (or requester) index instead of the primary key when the
  statistics estimate the tenant at one row, reading the tenant's calls: both paths cost the same to the planner
  then. After ANALYZE each reads its one row. A time-range export's span (``_span``) and end hashes likewise read
  the chain (or the tenant's events) under stale statistics, and only the range after ANALYZE.
- The changelist's bounded count (``LIMIT 10001``) reads the tenant's calls up to that bound, by design.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.security_review.query_plans import ago, clone, json_plans, rows_read, uuid_of
from toolhub.models import AuditEvent, ToolCall

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

CALLS = ToolCall._meta.db_table


def test_the_calls_page_of_a_tenant_reads_the_page_not_its_whole_history(
    acme_operator: User, platform_user: User
) -> None:
    """Found: the calls changelist of one tenant (``-created_at, -id``) read over ``(tenant, created_at)`` and sorted
    on ``id``: under statistics older than the rows it sorted every call of the tenant (601 read for a page of 100).
    Expect: acme's page, as acme's operator (filtered or not) and as a platform user filtering ``?tenant=acme``,
    reads at most the page and a few more calls in its listing statement, and lists the newest call."""
    newest = ToolCall.objects.create(tool_name="record_effect", status="succeeded", tenant="acme")
    clone(ToolCall, newest, 600, id=uuid_of("acme-old"), created_at=ago("g + 10"))
    clone(ToolCall, newest, 300, id=uuid_of("globex"), tenant="'globex'", created_at=ago("g"))
    pages = {
        "acme's operator": lambda: console(acme_operator).get("/admin/toolhub/toolcall/"),
        "acme's operator, ?tenant=acme": lambda: console(acme_operator).get("/admin/toolhub/toolcall/?tenant=acme"),
        "a platform user, ?tenant=acme": lambda: console(platform_user).get("/admin/toolhub/toolcall/?tenant=acme"),
    }
    for who, page in pages.items():
        shown: list[Any] = []
        plans = json_plans(lambda page=page: shown.append(page()))  # type: ignore[misc]
        assert shown[0].status_code == 200 and str(newest.pk) in shown[0].content.decode(), who
        listing = [(sql, plan) for sql, plan in plans if " ORDER BY " in sql and "COUNT(" not in sql and CALLS in sql]
        assert listing, who
        read = sum(rows_read(plan, CALLS) for _, plan in listing)
        assert read <= 110, f"{who}: the page of 100 calls read {read}"
