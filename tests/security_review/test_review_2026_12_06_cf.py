"""Review 2026-12-06 cf: follow-up of review cc (the admin lists sort only on indexes).

Each test fails on the reviewed code (main at 3b32380) and passes now.

Findings:

1. Review cc refused every sort no index serves, the configuration lists' too: approval rules by priority or name,
   users by e-mail or first name, tenants by name, grants by effect, agents by their limits no longer sorted, though
   those tables hold rows people add one by one. Fixed in the shared mechanism: an admin declares its table small
   (``small_table = True``, ``GuardedLookups``) and ``IndexedSorting`` sorts it by any column Django would; declared
   on the configuration admins only, never on a list of rows the platform writes as it runs.
2. The sagas list's default ordering (``-updated_at``) had no index: each page sorted every saga of the viewer's
   tenants (PostgreSQL: a sequential scan and a sort of them all). Operators read it most recently active first (a
   compensation failing on an old saga moves it up), so ``updated_at`` is indexed now (sagas migration 0009), and its
   header sorts again.
3. ``indexed_column`` counted any column of a multi-column index: the compensations sorted by ``sequence`` or
   ``next_attempt_at`` (indexed after ``saga``, after ``status``), and filtered ``?sequence__gt=``,
   ``?next_attempt_at__lt=``, the calls ``?turn__gt=`` or ``?position=`` (after ``run_id``), the events
   ``?seq__lte=`` (after ``chain``, superusers): PostgreSQL read all the viewer's rows for each page. Now a column
   counts when it leads the index, or follows columns the query string compares for equality to one value
   (``?chain=3&seq__lte=50``, ``?saga__id__exact=7&o=<sequence>``: ``compared_columns``).

Checked and holds:
- A small table never sorts through a relation withheld in part from the viewer: a tenant's staff sorting grants or
  rules by tool group would order them by a withheld group's name; that column (``ShownRelation``) has no order
  field, so the sort is skipped (``test_a_small_table_is_not_sorted_by_a_withheld_relation``).
- The tenant scope is no equality an index orders by: several tenants are ``tenant IN (...)``, everyone none; no
  index of the console's tables holds a column only after ``tenant``, so none was counted for it.
- Calls, events, runs, approvals, sagas, compensations, deliveries, paused runs, login logs and the demo's tables
  declare no small table (``test_only_configuration_admins_declare_a_small_table``).

4. The compensations list's default ordering (the model's ``saga, -sequence``) went through the saga's own ordering
   (``-created_at``): each page joined and sorted every compensation of the viewer's tenants (PostgreSQL, 3,000 rows:
   a sequential scan and a top-N sort). ``CompensationAdmin.ordering`` is ``-saga_id, -sequence`` now: grouped by
   saga, newest first, read backwards from the ``(saga, sequence)`` index.

PostgreSQL plans at a few thousand rows (``query_plans``): the sagas list read all 3,001 of acme's sagas and sorted
them (1.1 ms) and reads 101 from the ``updated_at`` index now (0.2 ms); compensations sorted by ``sequence`` alone were
a sequential scan of all 3,001 and a sort (4.8 ms), and one saga's sort by it reads the index.
"""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.models import Agent
from approvals.models import ApprovalRule
from tests.security_review.list_orders import column_index, list_ordering
from tests.security_review.query_plans import ago, analyze, clone, explained, seq_scans, uuid_of
from tests.tenancy.conftest import make_user
from toolhub.models import Grant, Tenant, ToolCall, ToolGroup
from toolhub.sagas.models import Compensation, Saga

pytestmark = pytest.mark.django_db

RULES = "/admin/approvals/approvalrule/"
USERS = "/admin/auth/user/"
TENANTS = "/admin/toolhub/tenant/"
GRANTS = "/admin/toolhub/grant/"
AGENTS = "/admin/agents_app/agent/"
GROUPS = "/admin/toolhub/toolgroup/"
SAGAS = "/admin/sagas/saga/"
COMPENSATIONS = "/admin/sagas/compensation/"
CALLS = "/admin/toolhub/toolcall/"
EVENTS = "/admin/toolhub/auditevent/"

#: The admins of configuration people add row by row: the only ones whose table is small.
CONFIGURATION = {
    "TenantAdmin",
    "TenantMembershipAdmin",
    "TenantUserAdmin",
    "RoleGroupAdmin",
    "ApiTokenAdmin",
    "ToolDefinitionAdmin",
    "ToolGroupAdmin",
    "GrantAdmin",
    "ApprovalRuleAdmin",
    "ModelProviderAdmin",
    "AgentAdmin",
    "RemoteMcpServerAdmin",
    "RemoteMcpToolAdmin",
    "RemoteMcpCredentialAdmin",
}


@pytest.fixture
def root() -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(User.objects.create_superuser("cf-root", "root@example.com", "pw"))
    return client


@pytest.fixture
def acme_staff(tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group]) -> Client:
    """acme's operator, auditor and developer at once, with the configuration pages' view permissions."""
    client = Client(raise_request_exception=False)
    groups = (roles["developers"], roles["operators"], roles["auditors"])
    permissions = ("approvals.view_approvalrule", "toolhub.view_grant")
    client.force_login(make_user("acme-staff", tenant=tenant, staff=True, groups=groups, permissions=permissions))
    return client


@pytest.fixture
def configuration(tenant: Tenant) -> None:
    group = ToolGroup.objects.create(name="cf-group")
    ApprovalRule.objects.create(name="cf-rule", priority=5, tool_name="cf_tool", tenant=tenant, tool_group=group)
    Grant.objects.create(tenant=tenant, tool_group=group)
    Agent.objects.create(name="cf-agent", tenant=tenant)


@pytest.mark.usefixtures("configuration")
@pytest.mark.parametrize(
    "page, column, order_field",
    [
        (RULES, "priority", "priority"),
        (RULES, "name", "name"),
        (RULES, "tool_group", "tool_group"),
        (USERS, "email", "email"),
        (USERS, "first_name", "first_name"),
        (TENANTS, "name", "name"),
        (GRANTS, "effect", "effect"),
        (GRANTS, "tool_group", "tool_group"),
        (AGENTS, "max_tool_calls", "max_tool_calls"),
        (AGENTS, "created_at", "created_at"),
        (GROUPS, "active_by_default", "active_by_default"),
    ],
)
def test_a_configuration_list_sorts_by_its_columns(root: Client, page: str, column: str, order_field: str) -> None:
    """Found: ``?o=`` by an unindexed column of a configuration list (rules by priority, users by e-mail) was skipped
    since review cc, its header no link. Expect: a small table's list sorts by it both ways."""
    index = column_index(root, page, column)
    assert list_ordering(root, page, o=str(index))[0] == order_field
    assert list_ordering(root, page, o=f"-{index}")[0] == f"-{order_field}"


def test_only_configuration_admins_declare_a_small_table() -> None:
    """Found: no admin could declare its table small. Expect: the configuration admins do, and none of calls, events,
    runs, approvals, sagas, compensations, webhook deliveries, paused runs or login logs."""
    small = {type(model_admin).__name__ for model_admin in admin.site._registry.values() if model_admin.small_table}
    assert small == CONFIGURATION


@pytest.mark.usefixtures("configuration")
@pytest.mark.parametrize("page", [RULES, GRANTS])
def test_a_small_table_is_not_sorted_by_a_withheld_relation(acme_staff: Client, page: str) -> None:
    """Expect: a tenant's staff, who see tool groups only in part, do not sort rules or grants by tool group (the
    withheld group's name would order the list): the sort is skipped, the header is no link; others still sort."""
    index = column_index(acme_staff, page, "tool_group")
    unsorted = list_ordering(acme_staff, page)
    assert list_ordering(acme_staff, page, o=str(index)) == unsorted
    assert not acme_staff.get(page).context["cl"].get_ordering_field_columns().get(index)
    tool_name = column_index(acme_staff, page, "tool_name")
    assert list_ordering(acme_staff, page, o=str(tool_name))[0] == "tool_name"


def test_the_sagas_list_sorts_by_when_it_moved(acme_staff: Client) -> None:
    """Found: the sagas' "Updated at" header was no sort link (no index), yet the list sorted by it on every page.
    Expect: ``updated_at`` is indexed, its header sorts both ways."""
    index = column_index(acme_staff, SAGAS, "updated_at")
    assert list_ordering(acme_staff, SAGAS, o=str(index))[0] == "updated_at"
    assert list_ordering(acme_staff, SAGAS, o=f"-{index}")[0] == "-updated_at"
    assert "updated_at" in acme_staff.get(SAGAS).context["cl"].sortable_by


@pytest.mark.parametrize("column", ["sequence", "next_attempt_at"])
def test_compensations_are_not_sorted_by_a_later_column_of_an_index(acme_staff: Client, column: str) -> None:
    """Found: ``?o=`` by ``sequence`` (indexed after ``saga``) or ``next_attempt_at`` (after ``status``) sorted every
    compensation of the viewer's tenants. Expect: skipped; its header is no link."""
    index = column_index(acme_staff, COMPENSATIONS, column)
    unsorted = list_ordering(acme_staff, COMPENSATIONS)
    assert list_ordering(acme_staff, COMPENSATIONS, o=str(index)) == unsorted
    assert column not in acme_staff.get(COMPENSATIONS).context["cl"].sortable_by


def test_one_sagas_compensations_sort_by_sequence(acme_staff: Client, tenant: Tenant) -> None:
    """Expect: with the saga compared for equality (``?saga__id__exact=``) the index orders ``sequence``: it sorts."""
    saga = Saga.objects.create(key="cf", tenant=tenant.slug)
    index = column_index(acme_staff, COMPENSATIONS, "sequence")
    ordering = list_ordering(acme_staff, COMPENSATIONS, o=f"-{index}", saga__id__exact=str(saga.pk))
    assert ordering[0] == "-sequence"


@pytest.mark.parametrize(
    "page, query",
    [
        (COMPENSATIONS, "sequence__gt=1"),
        (COMPENSATIONS, "next_attempt_at__lt=2026-01-01"),
        (CALLS, "turn__gt=1"),
        (CALLS, "position=0"),
        (EVENTS, "seq__lte=50"),
        (EVENTS, "chain=3&chain=4&seq__lte=50"),
    ],
)
def test_a_later_column_of_an_index_is_no_filter_alone(root: Client, page: str, query: str) -> None:
    """Found: a filter on a column a multi-column index holds after another (``?sequence__gt=1``, ``?turn__gt=1``)
    answered 200, read from every row. Expect: 400, as for a column no index holds."""
    assert root.get(f"{page}?{query}").status_code == 400, query


@pytest.mark.parametrize(
    "page, query",
    [(EVENTS, "chain=3&seq__lte=50"), (EVENTS, "chain__exact=3&seq__gt=2"), (COMPENSATIONS, "status=failed")],
)
def test_a_later_column_after_an_equality_still_filters(root: Client, page: str, query: str) -> None:
    """Expect: a column after columns compared for equality (or a leading one) still filters."""
    assert root.get(f"{page}?{query}").status_code == 200, query


def _saga_backlog(tenant: Tenant, other_tenant: Tenant) -> Saga:
    saga = Saga.objects.create(key="cf-template", tenant=tenant.slug)
    clone(Saga, saga, 3_000, key="'cf-' || g", updated_at=ago("g"))
    clone(Saga, saga, 3_000, key="'cf-' || g", tenant=f"'{other_tenant.slug}'", updated_at=ago("g"))
    return saga


@pytest.mark.postgres
def test_the_sagas_list_reads_an_index(acme_staff: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    """Found: each page of the sagas list read every saga of the viewer's tenants and sorted them (no index of
    ``updated_at``). Expect: the page's query reads the index backwards, no sequential scan of the sagas."""
    _saga_backlog(tenant, other_tenant)
    analyze()
    plans = explained(lambda: acme_staff.get(SAGAS))
    listed = [plan for sql, plan in plans if 'ORDER BY "sagas_saga"."updated_at" DESC' in sql]
    assert listed, [sql for sql, _ in plans]
    for plan in listed:
        assert not seq_scans(plan), plan
        assert "Index Scan Backward" in plan, plan


@pytest.fixture
def compensation_backlog(tenant: Tenant, other_tenant: Tenant) -> Saga:
    """3,000 compensations of acme's over 50 sagas, among 6,000 sagas of acme's and globex's; analyzed."""
    saga = _saga_backlog(tenant, other_tenant)
    call = ToolCall.objects.create(tool_name="cf_book", status="succeeded", tenant=tenant.slug, saga_id="cf")
    clone(ToolCall, call, 3_000, id=uuid_of("cf"))
    step = Compensation.objects.create(saga=saga, sequence=0, step_call=call, tool_name="cf_undo", status="failed")
    clone(Compensation, step, 3_000, saga_id=f"{saga.pk} + g % 50", sequence="g", step_call_id=uuid_of("cf"))
    analyze()
    return saga


@pytest.mark.postgres
def test_the_compensations_list_reads_an_index(acme_staff: Client, compensation_backlog: Saga) -> None:
    """Found: the compensations' default ordering (the model's ``saga, -sequence``) went through the saga's own
    ordering (``created_at``): each page joined and sorted every compensation of acme's (a sequential scan). Expect:
    newest saga and step first on the ``(saga, sequence)`` index, no sequential scan of the compensations."""
    plans = explained(lambda: acme_staff.get(COMPENSATIONS))
    # The page's query; the bounded count (review cr: ``COUNT`` over ``LIMIT 10001``) reads up to its bound by design.
    listed = [
        plan for sql, plan in plans if "LIMIT" in sql and 'FROM "sagas_compensation"' in sql and "COUNT(" not in sql
    ]
    assert listed, [sql for sql, _ in plans]
    for plan in listed:
        assert not seq_scans(plan), plan
        # Review ef: a tenant's page reads its own compensations on (tenant, saga, sequence), in the same order.
        assert "Index Scan Backward using compensation_tenant_saga" in plan, plan


@pytest.mark.postgres
def test_one_sagas_compensations_sorted_by_sequence_read_an_index(
    acme_staff: Client, compensation_backlog: Saga
) -> None:
    """Expect: one saga's compensations (``?saga__id__exact=``) sorted by ``sequence`` read the ``(saga, sequence)``
    index, no sequential scan of the compensations (without the saga that sort is refused: it read them all)."""
    index = column_index(acme_staff, COMPENSATIONS, "sequence")
    query = {"o": str(index), "saga__id__exact": str(compensation_backlog.pk)}
    plans = explained(lambda: acme_staff.get(COMPENSATIONS, query))
    listed = [plan for sql, plan in plans if 'ORDER BY "sagas_compensation"."sequence" ASC' in sql]
    assert listed, [sql for sql, _ in plans]
    for plan in listed:
        assert not seq_scans(plan), plan
