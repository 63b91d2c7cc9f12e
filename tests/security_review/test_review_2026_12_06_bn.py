"""Review 2026-12-06 bn: review of reviews bd (sagas sweep), bk (run bounds) and bl (admin lookups).

Each test failed on the reviewed code (main at 97171a2) and passes now.

Findings:

1. ``GuardedLookups`` let any lookup through on a declared field filter's path: ``?tool_name__regex=(a|aa)*$`` on the
   approval desk, ``?stop_reason__iregex=`` on the runs, ``?status__regex=`` on the sagas answered 200 and matched
   the pattern over every row of the viewer's tenants, review bl's rule notwithstanding. Fixed in
   ``GuardedLookups._declared_filter``: a declared field filter's path takes only ``INDEXED_LOOKUPS`` too.
2. The sagas sweep (review bd) read every failed direct step there ever was each tick, with two subqueries each: a
   handled failure (rolled back, or before a newer step) stays in ``toolcall_failed_direct_step`` for ever. On
   PostgreSQL the sweep's statement took 4.7 ms at 2,000 old failures, 193 ms at 20,000, 2.4 s at 100,000 (every
   5 s). Fixed in ``recovery._unheard_failures_to_roll_back``: failures of the last ``SAGA_UNHEARD_FAILURE_HOURS``
   (168) only, a range of the partial index.

Checked and holds:
- Sagas sweep (bd): a failure before the newest step left (the caller carried on, or retried the same step with
  success) is left alone (``newest_step_at <= created_at``); a failure is rolled back once (the rollbacks'
  ``failed_call``, ``saga_rollback`` locks the saga and returns the first); sagas, steps and rollbacks are keyed by
  (saga key, tenant), so two tenants sharing a key never touch each other's steps; the sweep reads direct steps
  only (``run_id IS NULL``), an agent run's saga is left to the runs sweep. ``automatic`` is true only when no
  person asked (``by is None`` and trigger ``step_failed``); on-demand and operator rollbacks say false.
- Run bounds (bk): ``json.dumps`` of a conversation costs 0.08 ms at 40 KB (20 messages), 1 ms at 375 KB, 6 ms at
  1.9 MB, about what the row's own save serializes again; the check is in the shared loop, so child runs are
  bounded too; agentic tools' inner loops are bounded by ``max_calls`` (<= ``MAX_CALLS``) and ``max_iterations``;
  ``dropped_calls`` holds a count and at most 50 names of 100 characters, never arguments. A conversation refused
  on its tool results ends the run with the calls executed and audited but their results not in the transcript
  (the run failed, ``conversation_size``, and says so).
- Admin (bl): every link the desk, runs, sagas and compensations' filters draw answers 200 (probed link by link);
  tests/browser on PostgreSQL with chromium (admin views, approvals, audit admin and console, desk, run cancel,
  tenant console) pass. ``?q=`` on the calls and events lists is exact on indexes (review bl); the runs list and
  the desk searched with ``icontains`` until review bp (now exact on indexes too, ``ExactSearchMixin``).

Not checked (left open): a direct call whose ``saga_id`` is an agent run's id in the same tenant names that run's
saga (``Saga`` is keyed by key and tenant alone), so its failure, heard or swept, would roll back the run's steps;
this predates review bd (the heard path does the same) and was not probed here.
"""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from tests.helpers import RequestCall
from tests.security_review.direct_sagas import unheard_call
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, uuid_of
from tests.tenancy.conftest import make_user
from toolhub import ToolResult, registry, tool
from toolhub.models import Tenant, ToolCall
from toolhub.sagas.models import Rollback, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep

pytestmark = pytest.mark.django_db


@tool
def ledger_entry(text: str) -> ToolResult:
    """Write an entry."""
    return ToolResult.text("noted")


@pytest.fixture(autouse=True)
def _tools() -> Iterator[None]:
    with registry.temporarily(ledger_entry):
        yield


@pytest.fixture
def acme_staff(tenant: Tenant, other_tenant: Tenant, request_call: RequestCall, roles: dict[str, Group]) -> Client:
    """acme's auditor and operator, with one call of acme's in the trail."""
    request_call("ledger_entry", {"text": "acme"}, make_user("al", tenant=tenant), tenant="acme")
    client = Client(raise_request_exception=False)
    groups = (roles["auditors"], roles["operators"])
    client.force_login(make_user("acme-staff", tenant=tenant, staff=True, groups=groups))
    return client


@pytest.mark.parametrize(
    "page, query",
    [
        ("/admin/approvals/approvalrequest/", "tool_name__regex=(a|aa)*$"),
        ("/admin/approvals/approvalrequest/", "risk__icontains=h"),
        ("/admin/agents_app/agentrun/", "stop_reason__iregex=.*"),
        ("/admin/agents_app/agentrun/", "status__contains=a"),
        ("/admin/sagas/saga/", "status__regex=(a|aa)*$"),
    ],
)
def test_declared_filters_paths_refuse_pattern_lookups(acme_staff: Client, page: str, query: str) -> None:
    """Found: a lookup on a declared field filter's path passed whatever it compared with (200: a regex or LIKE over
    every row of the viewer's tenants). Expect: 400, as for an undeclared column's pattern lookup."""
    assert acme_staff.get(page).status_code == 200, page
    assert acme_staff.get(f"{page}?{query}").status_code == 400


@pytest.mark.parametrize(
    "page, query",
    [
        ("/admin/approvals/approvalrequest/", "tool_name=ledger_entry&risk__exact=high"),
        ("/admin/approvals/approvalrequest/", "tool_name__isnull=False"),
        ("/admin/agents_app/agentrun/", "status__exact=failed&stop_reason__exact=error"),
        ("/admin/agents_app/agentrun/", "agent__id__exact=1"),
        ("/admin/sagas/saga/", "status__exact=open&tenant__exact=acme"),
    ],
)
def test_declared_filters_own_links_still_answer(acme_staff: Client, page: str, query: str) -> None:
    """Expect: the links a declared filter draws (exact, isnull, a relation's id) still answer 200."""
    assert acme_staff.get(f"{page}?{query}").status_code == 200, query


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_the_sagas_sweep_reads_no_old_handled_failures(alice: User) -> None:
    """Found: 20,000 failed direct steps of weeks ago, each already rolled back or with nothing left to undo, were read
    (with two subqueries each) on every tick. Expect: the sweep's statement runs its subqueries for the recent
    failures only, and a recent unheard failure is still rolled back."""
    unheard_call("book", {"item": "a"}, saga="deaf", user=alice)
    template = ToolCall.objects.create(tool_name="book", status="failed", tenant="acme", saga_id="x")
    weeks = "60 * 24 * 14"
    clone(
        ToolCall,
        template,
        20_000,
        id=uuid_of("bn"),
        saga_id="'old-' || g",
        created_at=ago(f"{weeks} + g"),
        finished_at=ago(f"{weeks} + g"),
    )
    old = Saga.objects.create(key="old", tenant="acme", status="compensated")
    rollback = Rollback.objects.create(saga=old, trigger="on_demand", requested_by="x", finished_at=timezone.now())
    clone(Rollback, rollback, 10_000, failed_call_id=uuid_of("bn"))
    unheard_call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    analyze()
    plans = explained(sagas_sweep)
    unheard = [plan for sql, plan in plans if "toolcall_failed_direct_step" in plan]
    assert len(unheard) == 2  # review bv: the window rolled back, and the one before it held for an operator
    for plan in unheard:
        assert max_loops(plan) < 200, plan
    assert Saga.objects.get(key="deaf").status == SagaStatus.COMPENSATED
