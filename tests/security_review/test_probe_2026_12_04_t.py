"""Probe of 2026-12-04 (t): approvals end to end, the audit console as tenant staff, the API's lists.

Each test fails on the code as probed; its docstring says what was found ("Found: ...") and what is expected
("Expect: ..."). Tried and found holding (no test here): deciding another tenant's request through the API,
the desk's page and its bulk actions; approving a stale round or hash (409, nothing recorded); an edit after a
first approval (a new round, the editor counted once); the requester deciding through every door; expired,
rejected and cancelled requests decided again; sensitive values in approval events, diffs, webhooks and the
call export; the OpenAPI schema as another tenant's member; the API's filters and cursors as tenant staff.
"""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub.models import CallStatus, Tenant, ToolCall, ToolGroup

# --- the approval desk: which tool group governs a tenant's request ------------------------------------------------


@pytest.mark.django_db
def test_a_tool_group_bound_to_acme_decides_who_approves_globexs_calls(
    tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group], globex_user: User
) -> None:
    """Found: ``approvals.services._governing_group`` picks the group that governs a request's approvers as "the
    first by name that restricts approvers" among every group holding the tool (``tool_group_names``), without
    the groups' activation rules and without the call's tenant. The platform gives each tenant its own payments
    group for one tool: ``acme-payments`` (rules ``[{"tenants": ["acme"]}]``, approvers ``acme-treasury``) and
    ``globex-payments`` (rules ``[{"tenants": ["globex"]}]``, approvers ``globex-treasury``). globex's calls are
    governed by acme's group: the request names ``acme-treasury`` (a group of acme's, shown on globex's desk), a
    globex operator outside ``globex-treasury`` but in ``acme-treasury`` approves a globex payment and it runs,
    and globex's own treasurers are refused. A tool in two restricting groups gets one group's restriction only
    (the one first by name), never both.
    Expect: a request is governed by the groups that apply to its call's tenant (a group whose rules name only
    other tenants never governs it), and when several restrict approvers every restriction holds: here the
    request names ``globex-treasury`` and the operator outside it is refused (403), nothing runs.
    """
    acme_treasury = Group.objects.create(name="acme-treasury")
    globex_treasury = Group.objects.create(name="globex-treasury")
    ToolGroup.objects.create(
        name="acme-payments",
        extra_tools=["risky_effect"],
        approver_group=acme_treasury,
        activation_rules=[{"tenants": ["acme"]}],
    )
    ToolGroup.objects.create(
        name="globex-payments",
        extra_tools=["risky_effect"],
        approver_group=globex_treasury,
        activation_rules=[{"tenants": ["globex"]}],
    )
    outside_treasury = make_user(
        "globex-op-not-treasury", tenant=other_tenant, staff=True, groups=(roles["operators"], acme_treasury)
    )

    held = client_for(globex_user).post(
        "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "wire 900"}}, format="json"
    )
    assert held.status_code == 202, held.content
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])
    assert request.tenant == "globex"

    answer = client_for(outside_treasury).post(
        f"/api/v1/approvals/{request.pk}/approve/", {"round": request.round}, format="json"
    )

    request.refresh_from_db()
    assert request.approver_group == globex_treasury, f"globex's request is governed by {request.approver_group}"
    assert answer.status_code == 403, "a globex operator outside globex-treasury approved a globex payment"
    assert request.status == ApprovalStatus.PENDING and not ApprovalDecision.objects.exists()
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL
    assert not SideEffect.objects.exists()


# --- the audit console: a list's count as tenant staff read it (PostgreSQL) ----------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_call_list_count_tells_acmes_auditor_how_many_calls_globex_made_of_a_tool(
    tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group]
) -> None:
    """Found: the console's lists (``ToolCallAdmin``, ``AuditEventAdmin``: ``LeanChangeListMixin``) count with
    ``toolhub.admin_lists.EstimatedCountPaginator``: when PostgreSQL's planner expects more than 10,000 rows it
    shows the planner's estimate instead of counting. The estimate is built from the whole table's statistics
    (every tenant's rows: the share of acme's rows times the share of the tool's rows, over all tenants), not
    from the rows the viewer may see. acme (30,000 calls of ``calculate``, none of ``debit``) and globex (30,000
    calls of ``debit``): acme's auditor opens ``/admin/toolhub/toolcall/?tool=debit`` and reads "15000 tool
    calls" over an empty list, a figure that grows and shrinks with globex's use of ``debit`` (the same with
    ``?status=``, ``?kind=``, the date range, and events by ``?event_type=``): a count oracle about another
    tenant's activity, which the README promises no list gives ("Another tenant's id answers exactly like a
    missing one ... Nor can what a page withholds").
    Expect: a viewer who stays within tenants reads a count of the rows they may see (counted, bounded as now,
    e.g. "more than 10,000" beyond the bound), never the planner's estimate over every tenant's rows: here 0.
    """
    auditor = make_user("acme-auditor-t", tenant=tenant, staff=True, groups=(roles["auditors"],))
    rows = [ToolCall(tool_name="calculate", status=CallStatus.SUCCEEDED, tenant="acme") for _ in range(30_000)]
    rows += [ToolCall(tool_name="debit", status=CallStatus.SUCCEEDED, tenant="globex") for _ in range(30_000)]
    ToolCall.objects.bulk_create(rows, batch_size=5_000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ToolCall._meta.db_table}")
    assert not ToolCall.objects.filter(tenant="acme", tool_name="debit").exists()

    page = console(auditor).get("/admin/toolhub/toolcall/?tool=debit")

    assert page.status_code == 200
    counts = re.findall(r"(\d+) tool calls?\b", page.content.decode())
    assert counts, "the list shows no count"
    assert [int(count) for count in counts] == [0] * len(counts), (
        f"acme's auditor reads {counts} calls of debit, all globex's"
    )
