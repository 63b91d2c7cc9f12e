"""Review w (2026-12-07): the newest partial indexes and the queries meant to use them (reviews e and m), measured on
PostgreSQL with and without statistics of the rows, and other per-tenant lists read for one page.

Findings: none fixed. Two measured problems are left open below (no fix proven in this review's time, so no failing
test is committed for them).

Left open (measured, not fixed):
1. (Fixed since by review y: approvals 0021, ``test_review_2026_12_07_y.py``.) Review m's desk index holds only
   without statistics. With the approvals table analyzed (autovacuum's state in
   production), one pending request of acme beside acme's 3,000 decided ones and globex's 3,000 pending ones: the
   desk's page and its changelist count read ``approvals_approvalrequest_status_...`` (status alone) and filter the
   tenant, reading globex's whole queue (3,001 rows each; the title's count, an index-only scan, keeps
   ``approval_tenant_pending``). Per-column statistics make acme half of all requests, so half the pending ones: the
   partial index looks no cheaper. Dropping the status index made it a sequential scan (6,001 rows); extended
   statistics (``CREATE STATISTICS ... (mcv) ON tenant, status``) fixed the row estimate but not the choice, and
   both together gave a sequential scan estimated at 1 row: the partial index's cost is reckoned from the tenant
   column alone (half the table). A fix needs another shape (not found here).
   Consequence for CI: ``tests/security_review/query_plans.analyze`` leaves ``pg_class`` sizes behind after the
   test's rollback (ANALYZE writes them in place; TRUNCATE keeps them too, checked in psql), so review m's desk test,
   which read plans under "statistics older than the rows", failed (6,003 rows) when run after
   ``test_review_2026_12_06_dx.py``. Reviews e's and m's tests now analyze the tables after writing their rows, and
   m's desk test measures one pending request among each tenant's 3,000 decided ones (the case above stays open).
2. The audit browser searched by a run's id (the run page's "audit events of this run") or a call's id, for an
   operator of one tenant (``tenant IN (..) AND (call_id = key OR run_id = key)``): without statistics PostgreSQL
   walks ``audit_tenant_created`` in the list's order, 3,014 rows for a run of 10 events among its tenant's 3,000
   newer ones (count and page alike); analyzed, it reads the run's events on ``run_id``/``call_id``. A
   ``pk IN (call's UNION run's)`` rewrite (review m's form) bounded the count but not the page (the planner walked by
   time hashing the UNION), so nothing was changed.

Checked and holding:
- ``approval_tenant_pending`` (approvals 0020, review m): its condition is ``status = 'pending'`` and every desk read
  says exactly that (``StatusFilter`` and ``pending_count`` filter ``status=ApprovalStatus.PENDING``, the API's
  ``?status=pending`` a ``ChoiceFilter`` equality). With 1,000 decided requests of the operator's tenant and 1,000
  decided of another, the tables analyzed (stale statistics are not reproducible in the suite: see 1.), each of
  the desk's pages reads at most 10 request rows: plain, with each of its filters (risk, tool, source, tenant),
  searched by the held call's id and by the asker's username, reordered (``o=``), for a tenant's operator and for a
  superuser, and the API's pending list (alice's, the operator's, the superuser's, with ``?tool=``); which
  index serves them followed earlier tests' ``pg_class`` state, so only rows read are asserted
  (``test_the_desk_reads_pending_requests_with_every_filter_search_and_list``).
- A request leaving ``pending`` leaves the partial index: once rejected through the service, the desk's page and its
  title's count read no request row, say 0 pending, and the request is listed under ``?status=rejected``
  (``test_a_decided_request_leaves_the_pending_index``). On SQLite (no partial index plans) the page and count answer
  the same (``test_the_desk_lists_and_counts_only_pending_requests``).
- ``toolcall_compensates`` (toolhub 0054, review e): its condition ``(context -> 'compensates') IS NOT NULL`` is
  implied by every query on the key (the saga trail's ``IN``, ``agentic.inner``'s equality); review e's test pins
  the trail's reads.
- The saga list's UNION (``sagas_visible_to``, review m): for a requester it lists exactly the sagas the two ORed
  subqueries listed before (own steps' or opened by them, in their tenants or in none), in the same order
  (``-created_at, -id``, ties on ``created_at`` included), each once though a saga matches both parts and holds two
  of their steps, through every cursor page (``page_size=2``); an operator's and a superuser's lists (tenant-wide, not
  the UNION) are their tenant's and every saga; the count agrees (``test_the_saga_list_union_lists_what_the_or_did``,
  PostgreSQL and SQLite).
- A tenant's webhook delivery pages (plain, ``?status__exact=failed``, page 2) read that tenant's deliveries on
  ``webhook_tenant_created`` and none of another tenant's 3,000, stale or analyzed
  (``test_a_tenants_webhook_deliveries_page_reads_none_of_another_tenants``); the calls changelist searched by a run
  id reads two call rows.
- Not measured (time): remote MCP tools (servers are platform-wide; ``remote_mcp_tool_once`` leads with the server),
  search index rows, notifications (e-mails, no table).
"""

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus, WebhookDelivery
from approvals.services import approval_reject
from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.security_review.query_plans import ago, analyze, clone, json_plans, rows_read, uuid_of
from toolhub.models import ToolCall
from toolhub.sagas.models import Compensation, Saga
from toolhub.sagas.selectors import sagas_visible_to
from toolhub.tenancy import visible_rows

REQUESTS = ApprovalRequest._meta.db_table
DESK = "/admin/approvals/approvalrequest/"


def _pending(alice: User, tenant: str = "acme") -> ApprovalRequest:
    call = ToolCall.objects.create(tool_name="record_effect", status="pending_approval", tenant=tenant, user=alice)
    return ApprovalRequest.objects.create(
        call=call,
        tenant=tenant,
        tool_name="record_effect",
        reason="r",
        requested_by=alice,
        risk="high",
        source="rule",
        expires_at=timezone.now() + dt.timedelta(days=1),
    )


def _decided_history(pending: ApprovalRequest, rows: int) -> None:
    """``rows`` decided requests of the pending one's tenant and ``rows`` of globex, older, in SQL."""
    for prefix, tenant, status in (("w-acme-done", "acme", "approved"), ("w-globex-done", "globex", "rejected")):
        clone(ToolCall, pending.call, rows, id=uuid_of(prefix), tenant=f"'{tenant}'", created_at=ago("g + 10"))
        clone(
            ApprovalRequest,
            pending,
            rows,
            call_id=uuid_of(prefix),
            tenant=f"'{tenant}'",
            status=f"'{status}'",
            created_at=ago("g + 10"),
        )
    # Statistics of these rows, as autovacuum keeps them: without, the plan depends on what earlier tests left in
    # ``pg_class`` (ANALYZE writes the sizes in place, kept past their rollback).
    analyze()


def _planned_get(client: Any, url: str) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """The answer to ``GET url`` and the plans of the statements it sent."""
    answers: list[Any] = []
    plans = json_plans(lambda: answers.append(client.get(url)))
    return answers[0], plans


def _requests_read(plans: list[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    return {sql[:300]: rows_read(plan, REQUESTS) for sql, plan in plans}


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_desk_reads_pending_requests_with_every_filter_search_and_list(
    alice: User, acme_operator: User, superuser: User
) -> None:
    """Holds: the desk's statements (page, title count, changelist count) name ``status = 'pending'`` as the partial
    index's condition says, with every filter and search the desk offers and in the API's pending list.
    Expect: with the tables analyzed, each page reads at most 10 request rows and lists the pending one (which index
    reads them, ``approval_tenant_pending`` or the status one, is the planner's choice: with one pending request
    both read one row, and the choice followed what earlier tests left in ``pg_class``)."""
    pending = _pending(alice)
    _decided_history(pending, 1000)
    searches = ("", "?risk=high", "?tool_name=record_effect", "?source=rule", "?tenant=acme", "?o=-7", "?q=alice")
    for user in (acme_operator, superuser):
        for query in (*searches, f"?q={pending.call_id}"):
            shown, plans = _planned_get(console(user), DESK + query)
            read = _requests_read(plans)
            assert shown.status_code == 200, query
            assert [row.pk for row in shown.context["cl"].result_list] == [pending.pk], query
            assert "Approval desk: 1 pending" in shown.content.decode(), query
            assert sum(read.values()) <= 10, (user.username, query, read)
    for user in (alice, acme_operator, superuser):
        for query in ("?status=pending", "?status=pending&tool=record_effect"):
            answered, plans = _planned_get(client_for(user), "/api/v1/approvals/" + query)
            read = _requests_read(plans)
            assert [row["id"] for row in answered.json()["results"]] == [pending.pk], (user.username, query)
            assert sum(read.values()) <= 10, (user.username, query, read)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_decided_request_leaves_the_pending_index(alice: User, acme_operator: User) -> None:
    """Holds: a request rejected through the service is no longer read as pending (``approval_tenant_pending``, since
    review y ``approval_tenant_status`` keyed on the status).
    Expect: the desk's page and title count then read no request row, say 0 pending, and the request is listed
    under ``?status=rejected``."""
    pending = _pending(alice)
    _decided_history(pending, 300)
    approval_reject(request_id=pending.pk, user=acme_operator, comment="no")
    assert ApprovalRequest.objects.get(pk=pending.pk).status == ApprovalStatus.REJECTED
    shown, plans = _planned_get(console(acme_operator), DESK)
    read = _requests_read(plans)
    assert "Approval desk: 0 pending" in shown.content.decode()
    assert list(shown.context["cl"].result_list) == []
    assert sum(read.values()) == 0, read
    decided = console(acme_operator).get(DESK + "?status=rejected")
    assert pending.pk in [row.pk for row in decided.context["cl"].result_list]


@pytest.mark.django_db
def test_the_desk_lists_and_counts_only_pending_requests(alice: User, acme_operator: User) -> None:
    """Holds (SQLite and PostgreSQL): the desk lists and counts the tenant's pending requests, not decided ones nor
    another tenant's. Expect: one pending listed and counted; once rejected, none, and it is listed as rejected."""
    pending = _pending(alice)
    other = _pending(alice)
    ApprovalRequest.objects.filter(pk=other.pk).update(status=ApprovalStatus.APPROVED)
    _pending(alice, tenant="globex")
    shown = console(acme_operator).get(DESK)
    assert [row.pk for row in shown.context["cl"].result_list] == [pending.pk]
    assert "Approval desk: 1 pending" in shown.content.decode()
    approval_reject(request_id=pending.pk, user=acme_operator, comment="no")
    shown = console(acme_operator).get(DESK)
    assert list(shown.context["cl"].result_list) == []
    assert "Approval desk: 0 pending" in shown.content.decode()
    decided = console(acme_operator).get(DESK + "?status=all")
    assert sorted(row.pk for row in decided.context["cl"].result_list) == [pending.pk, other.pk]


def _saga(key: str, tenant: str, opened_by: User | None, step_users: tuple[User, ...], at: dt.datetime) -> Saga:
    saga = Saga.objects.create(key=key, tenant=tenant, created_by=opened_by)
    Saga.objects.filter(pk=saga.pk).update(created_at=at)
    for sequence, user in enumerate(step_users, start=1):
        step = ToolCall.objects.create(tool_name="book", status="succeeded", tenant=tenant, user=user, saga_id=key)
        Compensation.objects.create(
            saga=saga, tenant=tenant, sequence=sequence, step_call=step, step_tool="book", tool_name="unbook"
        )
    return saga


def _walked(user: User) -> list[str]:
    """Every saga key of the user's API list, following the cursor pages of two."""
    keys: list[str] = []
    url: str | None = "/api/v1/sagas/?page_size=2"
    while url:
        page = client_for(user).get(url)
        assert page.status_code == 200, page.content
        keys += [row["key"] for row in page.json()["results"]]
        url = page.json()["next"]
    return keys


@pytest.mark.django_db
def test_the_saga_list_union_lists_what_the_or_did(
    alice: User, carol: User, acme_operator: User, superuser: User
) -> None:
    """Holds (SQLite and PostgreSQL): review m's ``pk IN (own UNION opened)`` lists for a requester exactly the sagas
    its ORed subqueries did, in the same order, each once; staff lists are unchanged.
    Expect: alice's API list, walked by cursor pages of two, is the OR's list by ``-created_at, -id`` with no
    duplicate (a saga she opened holding two of her steps included once); the operator's is acme's sagas, the
    superuser's every saga; counts agree."""
    now = timezone.now()
    tie = now - dt.timedelta(hours=1)
    made = [
        _saga("both", "acme", alice, (alice, alice), now - dt.timedelta(minutes=1)),
        _saga("own-step", "acme", carol, (alice, carol), tie),
        _saga("opened", "acme", alice, (), tie),
        _saga("opened-carol-step", "acme", alice, (carol,), tie),
        _saga("carols", "acme", carol, (carol,), now - dt.timedelta(minutes=3)),
        _saga("no-tenant", "", alice, (), now - dt.timedelta(minutes=4)),
        _saga("globex-opened", "globex", alice, (), now - dt.timedelta(minutes=5)),
        _saga("acme-nobody", "acme", None, (), now - dt.timedelta(minutes=6)),
        _saga("old-own", "acme", None, (alice,), now - dt.timedelta(days=30)),
    ]
    own = visible_rows(Saga.objects.all(), alice, tenant_wide=False, owner_field="compensations__step_call__user")
    opened = visible_rows(Saga.objects.all(), alice, tenant_wide=False, owner_field="created_by")
    before = Saga.objects.filter(Q(pk__in=own.values("pk")) | Q(pk__in=opened.values("pk")))
    expected = list(before.order_by("-created_at", "-id").values_list("key", flat=True))
    assert sorted(expected) == sorted(["both", "own-step", "opened", "opened-carol-step", "no-tenant", "old-own"]), (
        expected
    )
    assert _walked(alice) == expected
    now_listed = list(sagas_visible_to(alice).order_by("-created_at", "-id").values_list("key", flat=True))
    assert now_listed == expected
    assert sagas_visible_to(alice).count() == len(expected)
    newest = Saga.objects.order_by("-created_at", "-id")
    assert _walked(acme_operator) == list(newest.filter(tenant="acme").values_list("key", flat=True))
    assert _walked(superuser) == list(newest.values_list("key", flat=True))
    assert len(made) == Saga.objects.count()


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_tenants_webhook_deliveries_page_reads_none_of_another_tenants(acme_operator: User) -> None:
    """Holds: the webhook deliveries' admin list, scoped by the payload's tenant, reads on ``webhook_tenant_created``.
    Expect: with 3,000 deliveries of globex, whatever statistics earlier tests left, an acme operator's pages (plain,
    filtered, the second) read acme's 121 deliveries at most per statement and list acme's only."""
    first = WebhookDelivery.objects.create(
        event="approval.requested", payload={"tenant": "acme"}, next_attempt_at=timezone.now(), status="failed"
    )
    clone(
        WebhookDelivery,
        first,
        3000,
        message_id="'w-globex-' || g",
        payload="""'{"tenant": "globex"}'::jsonb""",
        status="'delivered'",
        created_at="clock_timestamp()",
    )
    clone(WebhookDelivery, first, 120, message_id="'w-acme-' || g", status="'delivered'", created_at=ago("g"))
    deliveries = WebhookDelivery._meta.db_table
    for query in ("", "?status__exact=failed", "?p=2"):
        shown, plans = _planned_get(console(acme_operator), "/admin/approvals/webhookdelivery/" + query)
        assert shown.status_code == 200, query
        assert {row.payload["tenant"] for row in shown.context["cl"].result_list} == {"acme"}, query
        for sql, plan in plans:
            assert rows_read(plan, deliveries) <= 121, (query, sql[:200])
