"""Review y (2026-12-07): the approval desk's plan with statistics (review w's "Left open" 1, review m's index).

Findings (the test failed on the code as found, main at 856166f, and passes now):

1. With the approvals table analyzed (autovacuum's state), one pending request of acme beside acme's 3,000 decided
   ones and globex's 3,000 pending ones, the desk's changelist count and its title's count (and, depending on the
   plan tests before it, the page) read globex's whole queue on the status index: 3,001 request rows a statement.
   Per-column statistics make acme half of all requests, so half of the pending ones, and
   ``approval_tenant_pending`` (``(tenant, created_at, id) WHERE status = 'pending'``) was costed at 1,501 rows.
   Now the index is ``approval_tenant_status`` on ``(tenant, status, created_at, id)`` over every request (the
   status is a key column, so the desk's two conditions are both index conditions) and the statistics object
   ``approval_tenant_status_stats`` (``CREATE STATISTICS ... (mcv) ON tenant, status``, PostgreSQL only) tells the
   planner which tenants' requests are pending: the desk's page, its count and the title's count are costed at 1 row and
   read 1 (approvals migration 0021; same statements, same queries)
   (``test_the_desk_reads_its_tenants_queue_not_another_tenants_with_statistics``).

Measured on PostgreSQL 15 with a copy of the table (6,001 rows as above, ``ANALYZE``d; rows read by
``EXPLAIN ANALYZE`` of ``tenant = 'acme' AND status = 'pending'``, page ``ORDER BY created_at, id LIMIT 100`` and
``count(*)``):
- m's partial ``(tenant, created_at, id) WHERE status = 'pending'`` alone: the count reads 3,001 on the status index.
- the same with the mcv statistics (review w): estimate 1 row, still 3,001 rows read on the status index, page too.
- a partial index keyed ``(tenant, status, created_at, id) WHERE status = 'pending'``: without statistics the count
  reads 3,001; with the mcv statistics the page and count both read 3,001 on the status index.
- ``(tenant, status, created_at, id)`` over every request without statistics: the page reads 1, the count 3,001.
- ``(tenant, status, created_at, id)`` over every request with the mcv statistics: page 1, count 1 (index only):
  the shape taken.
- a partial index keyed on an expression, ``(lower(tenant), created_at, id) WHERE status = 'pending'`` with the desk
  filtering ``lower(tenant)``: page 1, count 1, but costed at 15 rows, PostgreSQL's default selectivity of an
  equality (0.5 % of the 3,001 pending), not from the expression's statistics: ``examine_variable`` ignores partial
  indexes' expression statistics, so this holds by a default, and it would have moved the tenant scoping of one
  model off ``scoped``/``visible_rows``. Not taken.
- an expression index over every request on ``tenant || ' ' || status``: costed right (1 row, its statistics are
  used) but it too needs the desk's filter rewritten. Not taken.

Checked and holding:
- The statement counts of the desk and the API are unchanged (no query changed):
  ``tests/posture/test_admin_query_counts.py`` and ``test_api_query_counts.py`` pass on PostgreSQL as before.
- Review w's tests (every filter and search of the desk, a decided request leaving the queue) and review m's desk
  test pass on the new index, also run after ``test_review_2026_12_06_dx.py`` (whose ``pg_class`` sizes outlive it).
- Migration 0021 applies, reverses (the partial index back, the statistics dropped) and reapplies on PostgreSQL; on
  SQLite it only swaps the index.
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
from toolhub.models import ToolCall

REQUESTS = ApprovalRequest._meta.db_table
DESK = "/admin/approvals/approvalrequest/"


def _pending(alice: User) -> ApprovalRequest:
    call = ToolCall.objects.create(tool_name="record_effect", status="pending_approval", tenant="acme", user=alice)
    return ApprovalRequest.objects.create(
        call=call,
        tenant="acme",
        tool_name="record_effect",
        reason="r",
        requested_by=alice,
        risk="high",
        source="rule",
        expires_at=timezone.now() + dt.timedelta(days=1),
    )


def _planned(get: Any) -> tuple[Any, dict[str, int]]:
    answers: list[Any] = []
    plans = json_plans(lambda: answers.append(get()))
    return answers[0], {sql[:300]: rows_read(plan, REQUESTS) for sql, plan in plans}


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_desk_reads_its_tenants_queue_not_another_tenants_with_statistics(alice: User, acme_operator: User) -> None:
    """Found: analyzed, one pending request of acme beside acme's 3,000 decided and globex's 3,000 pending, the
    desk's counts read globex's whole queue on the status index (3,001 rows a statement): per-column statistics
    made acme half of the pending requests.
    Expect: the desk's page, its counts and the API's pending list each read at most 10 request rows in all, and
    list and count acme's one pending request."""
    pending = _pending(alice)
    for prefix, tenant, status in (("y-acme-done", "acme", "approved"), ("y-globex-queue", "globex", "pending")):
        clone(ToolCall, pending.call, 3000, id=uuid_of(prefix), tenant=f"'{tenant}'", created_at=ago("g + 10"))
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
    desk = console(acme_operator)
    shown, read = _planned(lambda: desk.get(DESK))
    assert shown.status_code == 200
    assert [row.pk for row in shown.context["cl"].result_list] == [pending.pk]
    assert "Approval desk: 1 pending" in shown.content.decode()
    assert sum(read.values()) <= 10, read
    api = client_for(acme_operator)
    answered, read = _planned(lambda: api.get("/api/v1/approvals/?status=pending"))
    assert [row["id"] for row in answered.json()["results"]] == [pending.pk]
    assert sum(read.values()) <= 10, read
