"""Review 2026-12-06 cc: the admin lists' sorting (``?o=``) on columns no index serves.

Each test fails on the reviewed code (main at e274cd0) and passes now.

Findings:

1. Review bs made a list's query-string comparisons take only indexed columns but left its sorting: ``?o=`` sorted
   the calls by ``agent_name``, ``kind`` or ``finished_at``, the events by ``status``, the runs by ``stop_reason``,
   ``turn``, ``finished_at`` or ``agent`` (a join on the agent's name), the desk by ``agent_name``, ``tool_name`` or
   ``risk``: each page sorted every row of the viewer's tenants, and their headers
   linked those sorts. Django reads ``?o=`` whatever ``sortable_by`` says. Fixed once for every list of the console
   (``GuardedLookups.get_changelist`` -> ``toolhub.admin_indexes.IndexedSorting``): a column sorts the list only if
   ``sortable_by`` names it and an index serves its order field (``indexed_column``; through a relation its last
   field; a foreign key only when its model has no ordering of its own); a refused sort is skipped as Django skips a
   ``?o=`` naming no sortable column (the list keeps its ordering, 200: review probe 03_b sorts every column of every
   list and expects 200), and its header is no link.

Checked and holds:
- (reading) The calls' CSV/JSON export sorts by ``-created_at, -id`` whatever ``?o=`` says (``toolhub.exports``),
  on an index; the trail's export reads a chain by ``seq``: neither takes the list's ``?o=``.
- Kept sorts still apply: the calls by ``created_at``, the desk by ``expires_at``, the runs by ``status``, the events
  by ``tool_name`` (``test_indexed_sorts_still_apply``).

Not fixed: the sagas' own default ordering (``-updated_at``, no index; ``?o=`` by it is refused now, its header no
link) sorts the viewer's sagas on every page; it needs an index or another default (a choice for the lead). Sorting
by an indexed column still reads every row of the viewer's tenants when the index does not lead with it
(``indexed_column`` counts any column of a composite index, as the filters do); no PostgreSQL plan check was added.
"""

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests.security_review.list_orders import column_index, list_ordering
from tests.tenancy.conftest import make_user
from toolhub.models import CallStatus, Tenant, ToolCall

pytestmark = pytest.mark.django_db

CALLS = "/admin/toolhub/toolcall/"
EVENTS = "/admin/toolhub/auditevent/"
RUNS = "/admin/agents_app/agentrun/"
DESK = "/admin/approvals/approvalrequest/"


@pytest.fixture
def acme_staff(tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group]) -> Client:
    """acme's operator and auditor at once (who reads calls, events, runs, sagas and the desk)."""
    client = Client(raise_request_exception=False)
    groups = (roles["developers"], roles["operators"], roles["auditors"])
    client.force_login(make_user("acme-staff", tenant=tenant, staff=True, groups=groups))
    return client


@pytest.mark.parametrize(
    "page, column, order_field",
    [
        (CALLS, "agent_name", "agent_name"),
        (CALLS, "kind", "kind"),
        (CALLS, "finished_at", "finished_at"),
        (EVENTS, "status", "status"),
        (RUNS, "stop_reason", "stop_reason"),
        (RUNS, "finished_at", "finished_at"),
        (RUNS, "turn", "turn"),
        (RUNS, "agent", "agent"),
        (DESK, "agent", "agent_name"),
        (DESK, "tool", "tool_name"),
        (DESK, "risk_shown", "risk"),
    ],
)
def test_a_list_is_not_sorted_by_a_column_no_index_serves(
    acme_staff: Client, page: str, column: str, order_field: str
) -> None:
    """Found: ``?o=<column>`` sorted the list by that unindexed column (every row of the viewer's tenants sorted for
    each page). Expect: the sort is skipped (200), the list keeps the ordering it has without ``?o=``."""
    index = column_index(acme_staff, page, column)
    unsorted = list_ordering(acme_staff, page)
    for sign in ("", "-"):
        ordering = list_ordering(acme_staff, page, o=f"{sign}{index}")
        assert ordering == unsorted, (page, column, ordering)
        assert not any(part.lstrip("-") == order_field for part in ordering), ordering


@pytest.mark.parametrize(
    "page, column, order_field",
    [
        (CALLS, "created_at", "created_at"),
        (CALLS, "tool_name", "tool_name"),
        (EVENTS, "tool_name", "tool_name"),
        (RUNS, "status", "status"),
        (DESK, "expires_in", "expires_at"),
        (DESK, "request_id", "pk"),
    ],
)
def test_indexed_sorts_still_apply(acme_staff: Client, page: str, column: str, order_field: str) -> None:
    """Expect: ``?o=`` by a column an index serves sorts the list by it, both ways."""
    index = column_index(acme_staff, page, column)
    assert list_ordering(acme_staff, page, o=str(index))[0] == order_field
    assert list_ordering(acme_staff, page, o=f"-{index}")[0] == f"-{order_field}"


def test_only_columns_an_index_serves_have_sort_links(acme_staff: Client, tenant: Tenant) -> None:
    """Found: the calls' "Agent name", "Kind" and "Finished at" headers were sort links (``class="sortable ..."``).
    Expect: plain headers; "Created at" and "Tool name" still link."""
    ToolCall.objects.create(tool_name="cc_lookup", status=CallStatus.SUCCEEDED, tenant=tenant.slug, agent_name="cc")
    response = acme_staff.get(CALLS)
    body = response.content.decode()
    for refused in ("agent_name", "kind", "finished_at"):
        assert f'class="column-{refused}"' in body, refused
        assert f"sortable column-{refused}" not in body, refused
        assert refused not in response.context["cl"].sortable_by
    for kept in ("created_at", "tool_name"):
        assert f"sortable column-{kept}" in body, kept
