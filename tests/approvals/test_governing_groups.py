"""Which tool groups govern a request's approvers: those bound to its tenant, every restriction among them holding.

A group's ``activation_rules`` bind it to tenants for runs; the same binding decides whether it governs a
tenant's approvals (``approvals.governing.governing_groups``). The first restricting group by name is the
request's own (``approver_group``, its escalation); the others' restrictions hold too (``further_restrictions``).
"""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals.deciders import approval_may_decide
from approvals.models import ApprovalRequest
from approvals.selectors import approval_progress, approvers_of
from tests.approvals.conftest import Hold
from tests.helpers import console
from toolhub.models import ToolGroup

pytestmark = pytest.mark.django_db


def _group(name: str, *members: User) -> Group:
    group = Group.objects.create(name=name)
    group.user_set.add(*members)
    return group


def _deciders(request: ApprovalRequest, *people: User) -> list[str]:
    """Who among ``people`` the four-eyes rule lets decide ``request`` (fresh rows: no permission cache)."""
    fresh = (User.objects.get(pk=person.pk) for person in people)
    return [person.username for person in fresh if approval_may_decide(request, person) is None]


def test_a_group_bound_to_another_tenant_never_governs_the_request(
    hold: Hold, operator: User, second_operator: User
) -> None:
    # given acme's tool group for risky_effect lets only treasury approve, and globex's lets only its own
    treasury = _group("acme-treasury", second_operator)
    ToolGroup.objects.create(
        name="acme-payments",
        extra_tools=["risky_effect"],
        approver_group=treasury,
        activation_rules=[{"tenants": ["acme"]}],
    )
    ToolGroup.objects.create(
        name="a-globex-payments",  # first by name: it would win if tenants did not count
        extra_tools=["risky_effect"],
        approver_group=_group("globex-treasury", operator),
        activation_rules=[{"tenants": ["globex"]}],
    )

    # when alice (acme) makes a call that is held
    request = hold()

    # then acme's group alone governs it: its treasury decides, globex's group is neither named nor obeyed
    assert request.approver_group == treasury and request.further_restrictions == []
    assert _deciders(request, operator, second_operator) == ["operator2"]
    assert approval_progress(request).group == "acme-treasury"
    page = console(operator).get(f"/admin/approvals/approvalrequest/{request.pk}/change/").content.decode()
    assert "acme-treasury" in page and "globex" not in page


def test_a_group_without_tenants_in_its_rules_governs_every_tenant(hold: Hold, operator: User) -> None:
    # given a group whose only rule names a role, not tenants
    approvers = _group("approvers")
    ToolGroup.objects.create(
        name="payments", extra_tools=["risky_effect"], approver_group=approvers, activation_rules=[{"roles": ["x"]}]
    )

    # when acme's call is held, then the group's restriction holds
    assert hold().approver_group == approvers


def test_every_applicable_groups_restriction_holds(
    hold: Hold, operator: User, second_operator: User, third_operator: User
) -> None:
    # given two groups of acme restrict risky_effect's approvers: one to treasury, one to risk
    treasury = _group("treasury", operator, second_operator)
    risk = _group("risk", second_operator, third_operator)
    ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)
    ToolGroup.objects.create(
        name="sanctions", extra_tools=["risky_effect"], approver_group=risk, activation_rules=[{"tenants": ["acme"]}]
    )

    # when a call is held
    request = hold()

    # then only who is in both may decide, by the rule and in the list of approvers alike; the desk names both
    assert request.approver_group == treasury
    assert request.further_restrictions == [{"group": risk.pk, "permission": ""}]
    assert _deciders(request, operator, second_operator, third_operator) == ["operator2"]
    assert [user.username for user in approvers_of(request)] == ["operator2"]
    assert approval_progress(request).group == "treasury, risk"


def test_escalation_stands_in_for_the_own_restriction_only(
    hold: Hold, operator: User, second_operator: User, third_operator: User
) -> None:
    # given payments (treasury, escalating to duty) and sanctions (risk) govern risky_effect
    duty = _group("duty", operator, second_operator)
    risk = _group("risk", second_operator)
    ToolGroup.objects.create(
        name="payments",
        extra_tools=["risky_effect"],
        approver_group=_group("treasury", third_operator),
        escalation_group=duty,
        escalate_after_seconds=60,
    )
    ToolGroup.objects.create(name="sanctions", extra_tools=["risky_effect"], approver_group=risk)
    request = hold()
    assert request.escalation_group == duty

    # when the request has escalated
    request.escalated_at = timezone.now() - timedelta(seconds=1)

    # then duty replaces treasury, but risk's restriction still holds: only who is on duty and in risk decides
    assert _deciders(request, operator, second_operator, third_operator) == ["operator2"]
    assert [user.username for user in approvers_of(request)] == ["operator2"]
