"""Review m (2026-12-07): PostgreSQL plans under statistics older than the rows (review e's sweep, continued).

Both plans are now measured with the tables analyzed after the rows were written (autovacuum's state): the state
"older than the rows" the review first measured depends on what earlier tests left in ``pg_class`` (ANALYZE keeps
its sizes through a rollback), so the tests failed after ``test_review_2026_12_06_dx.py`` (review w).

Findings (each test failed on the code as found, main at 91dbe2c, and passes now):

1. A requester's saga list (``GET /api/v1/sagas/``, and every ``sagas_visible_to`` read for someone without a
   tenant-wide role: ``saga_for_run``, the dashboard's count, a saga's rollback) filtered the sagas by two ORed
   ``pk IN (subquery)``: PostgreSQL cannot join ORed subqueries, so it walked every saga of every tenant by the
   list's order and tested each against the two hashed subplans (alice's one saga among 3,000 others read 3,003
   saga rows; review e measured it and left it). Now one ``pk IN (own UNION opened)``: the planner joins it to the
   sagas by id and reads the requester's own. Same statements, same count
   (``test_a_requesters_saga_list_reads_their_sagas_not_every_saga_by_time``).
2. The approval desk (pending requests, oldest first), its title's pending count and its changelist count read
   every request of the operator's tenant, decided ones included, filtering the status after
   ``approval_tenant_created`` (one pending among 3,000 decided: 9,003 rows a page). Now a partial index
   ``approval_tenant_pending`` on ``(tenant, created_at, id) WHERE status = 'pending'`` (approvals migration 0020)
   holds the queue only; decided pages keep ``approval_tenant_created``
   (``test_the_approval_desk_reads_the_operators_pending_requests``). Review w found that it holds only without
   statistics: analyzed, with another tenant's queue as long as this tenant's history (3,000 pending in globex
   beside acme's 3,000 decided), the planner reads globex's queue on the status index (3,001 rows a statement).
   The test now measures, analyzed, one pending among 3,000 decided in each tenant; review y replaced the partial
   index with ``approval_tenant_status`` on ``(tenant, status, created_at, id)`` and statistics over
   ``(tenant, status)`` (approvals 0021), which reads one row with globex's long queue too.

Checked and holding:
- Review e's ``toolcall_compensates`` (migration 0054): its condition on PostgreSQL is
  ``(context -> 'compensates') IS NOT NULL``; the trail's ``(context -> 'compensates') IN (...)`` and
  ``agentic.inner``'s ``= ...`` are strict operators on that same expression, so the planner proves the condition
  from them (e's test reads the plan under stale statistics: at most twice the undoing calls). The index is partial
  (only calls carrying the key: compensations' inner calls), so a call without it adds no index entry.
  ``saga_audit_events`` still orders by ``(created_at, id)``.
- A decided page (``?status=...``, newest first) reads on ``approval_tenant_created`` as before.

Left (not reached in this short review): a run's page, ``verify_audit`` / verification, trail exports and the calls
changelist for an operator of one tenant among many were not measured.
"""

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import ApprovalRequest
from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.security_review.query_plans import ago, analyze, clone, json_plans, rows_read, uuid_of
from tests.security_review.test_review_2026_12_06_gc import _rolled_back_saga, book_gc_seat, unbook_gc_seat
from tests.testapp.tools import record_effect
from toolhub.models import ToolCall
from toolhub.sagas.models import Saga
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SAGAS = Saga._meta.db_table


def test_a_requesters_saga_list_reads_their_sagas_not_every_saga_by_time(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a requester's list (``sagas_visible_to``: own steps' sagas OR sagas they opened, two ORed ``IN``
    subqueries) walked every saga by time and filtered each: alice's one saga among 3,000 others read 3,003 saga rows.
    Expect: with the sagas analyzed, the list reads the requester's sagas, not the others (at most 10
    saga rows in all its statements), and still lists hers."""
    with registry.temporarily(book_gc_seat, unbook_gc_seat, record_effect):
        saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks)
    clone(Saga, saga, 3000, key="'other-' || g", created_by_id="NULL", created_at="clock_timestamp()")
    analyze()
    client = client_for(alice)
    listed: list[Any] = []
    plans = json_plans(lambda: listed.append(client.get("/api/v1/sagas/")))
    assert [row["key"] for row in listed[0].json()["results"]] == [saga.key], listed[0].content
    read = {sql[:120]: rows_read(plan, SAGAS) for sql, plan in plans}
    assert sum(read.values()) <= 10, read


def test_the_approval_desk_reads_the_operators_pending_requests(acme_operator: User) -> None:
    """Found: the desk (``/admin/approvals/approvalrequest/``: pending, oldest first), its title's pending count and
    its changelist count found the tenant's pending requests on ``approval_tenant_created`` and filtered the status:
    each of the three read every request the tenant ever had, decided ones included (one pending among 3,000 decided:
    3,001 rows each, 9,003 a page). Expect: with the requests analyzed, beside globex's 3,000 decided ones too, the
    page reads the pending requests of the operator's tenant (at most 10 rows in all), and lists the one pending."""
    call = ToolCall.objects.create(tool_name="record_effect", status="pending_approval", tenant="acme")
    pending = ApprovalRequest.objects.create(
        call=call,
        tenant="acme",
        tool_name="record_effect",
        reason="r",
        expires_at=timezone.now() + dt.timedelta(days=1),
    )
    for prefix, tenant, status in (("acme-done", "acme", "approved"), ("globex", "globex", "approved")):
        clone(ToolCall, call, 3000, id=uuid_of(prefix), tenant=f"'{tenant}'", created_at=ago("g + 10"))
        clone(
            ApprovalRequest,
            pending,
            3000,
            call_id=uuid_of(prefix),
            tenant=f"'{tenant}'",
            status=f"'{status}'",
            created_at=ago("g + 10"),
        )
    analyze()
    listed: list[Any] = []
    plans = json_plans(lambda: listed.append(console(acme_operator).get("/admin/approvals/approvalrequest/")))
    assert str(pending.pk) in listed[0].content.decode()
    read = {sql[:300]: rows_read(plan, ApprovalRequest._meta.db_table) for sql, plan in plans}
    assert sum(read.values()) <= 10, read
