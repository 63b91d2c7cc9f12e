"""A tenant's approval rule may ask for more than the platform's rules, never for less.

Developers manage the approval rules bound to their tenants and only read the global ones. Before
this review rules were "first match wins" across both: a globex developer added a globex rule with a
lower priority number than the platform's "3 approvers" rule and globex's calls then needed one.
"""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import ApprovalRequest, ApprovalRule
from toolhub.models import CallStatus, Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tenant_rule_does_not_lower_the_approvals_a_global_rule_asks_for(
    request_call, other_tenant: Tenant, globex_developer: User, globex_user: User
) -> None:
    # given the platform's rule: wire notes need three approvers
    ApprovalRule.objects.create(
        name="wires",
        tool_name="record_effect",
        argument="note",
        operator="contains",
        value="wire",
        required_approvals=3,
    )
    # when globex's developer adds, in the admin, a globex rule evaluated first that asks for one
    client = Client()
    client.force_login(globex_developer)
    response = client.post(
        "/admin/approvals/approvalrule/add/",
        {
            "name": "globex quick",
            "enabled": "on",
            "priority": "1",
            "tool_name": "record_effect",
            "tenant": other_tenant.pk,
            "value": "null",
            "required_approvals": "1",
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert ApprovalRule.objects.get(name="globex quick").tenant == other_tenant

    held = request_call("record_effect", {"note": "wire 1M"}, globex_user, tenant="globex")

    # then globex's call still needs the platform's three approvals; the tenant's rule is the one shown
    assert held.status == CallStatus.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(call=held)
    assert request.required_approvals == 3
    assert request.rule.name == "globex quick"


def test_a_tenant_rule_still_asks_for_more_and_holds_what_global_rules_let_pass(
    request_call, other_tenant: Tenant, globex_user: User
) -> None:
    ApprovalRule.objects.create(
        name="wires", tool_name="record_effect", argument="note", operator="contains", value="wire"
    )
    ApprovalRule.objects.create(
        name="globex strict", priority=1, tool_name="record_effect", tenant=other_tenant, required_approvals=2
    )

    wire = request_call("record_effect", {"note": "wire"}, globex_user, tenant="globex")
    hello = request_call("record_effect", {"note": "hello"}, globex_user, tenant="globex")

    assert ApprovalRequest.objects.get(call=wire).required_approvals == 2
    assert ApprovalRequest.objects.get(call=hello).required_approvals == 2
