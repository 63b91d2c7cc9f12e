"""Who may still decide a request, asked once for everybody: the same people the four-eyes rule lets decide.

``approvers_of`` (the desk's "may approve" list and the approvers' e-mail) answers in one query; the rule
itself is ``approval_may_decide``, asked of one person at a time. These tests hold the two to the same
answer for every kind of person and every shape of request.
"""

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.deciders import approval_may_decide
from approvals.models import ApprovalRequest
from approvals.selectors import approvers_of
from tests.approvals.conftest import Hold
from toolhub.exceptions import NotInTenantError
from toolhub.governance import governance_scope
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.django_db

#: The permission a request may ask of its approvers besides the decide permission (``approver_permission``).
EXTRA_PERMISSION = "toolhub.change_tooldefinition"


def _permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


@pytest.fixture
def people(alice: User, operator: User, tenant: Tenant, other_tenant: Tenant) -> dict[str, User]:
    """Every kind of person the rule tells apart, each holding the decide permission unless named otherwise."""
    operators = Group.objects.get(name="operators")  # the decide permission (and change_tooldefinition)
    deciders = Group.objects.create(name="deciders-only")
    deciders.permissions.add(_permission("approvals.decide_approvalrequest"))
    approvers, fallback = Group.objects.create(name="approvers"), Group.objects.create(name="fallback")

    def person(name: str, *groups: Group, tenants: tuple[Tenant, ...] = (tenant,), **flags: Any) -> User:
        user = User.objects.create_user(name, f"{name}@example.com", "x", is_staff=True, **flags)
        user.groups.add(*groups)
        for member_of in tenants:
            TenantMembership.objects.create(user=user, tenant=member_of)
        return user

    cross = person("cross-tenant", deciders, tenants=())
    cross.user_permissions.add(_permission("toolhub.cross_tenant"))
    alice.groups.add(operators)  # the requester may decide in general, never her own call
    return {
        "requester": alice,
        "operator": operator,
        "approver": person("approver", operators, approvers),
        "approver-without-extra": person("approver-without-extra", deciders, approvers),
        "fallback": person("fallback", deciders, fallback),
        "globex": person("globex", operators, approvers, tenants=(other_tenant,)),
        "no-tenant": person("no-tenant", operators, approvers, tenants=()),
        "cross-tenant": cross,
        "inactive": person("inactive", operators, approvers, is_active=False),
        "viewer": person("viewer", approvers),
        "superuser-with-permission": person("superuser-with", deciders, tenants=(), is_superuser=True),
        "superuser-without": person("superuser-without", tenants=(), is_superuser=True),
    }


def _by_the_rule(request: ApprovalRequest) -> list[str]:
    """Everybody ``approval_may_decide`` lets decide, among those who hold the permission themselves."""
    decide = _permission("approvals.decide_approvalrequest")
    chosen = []
    for user in User.objects.order_by("pk"):
        user = User.objects.get(pk=user.pk)  # fresh: no permission cache from an earlier shape
        holds = user.user_permissions.filter(pk=decide.pk).exists() or user.groups.filter(permissions=decide).exists()
        try:
            allowed = approval_may_decide(request, user) is None
        except NotInTenantError:
            allowed = False
        if holds and user.is_active and allowed:
            chosen.append(user.username)
    return chosen


#: Another governing tool group's restriction (``further_restrictions``): none, the extra permission, the group.
FURTHER = {"none": [], "extra": [{"group": None, "permission": EXTRA_PERMISSION}], "group": [{"group": "approvers"}]}

SHAPES = list(itertools.product(["group", "none"], ["extra", "none"], ["escalated", "waiting"], ["acme", ""], FURTHER))


@pytest.mark.parametrize(("group", "extra", "escalation", "tenant_slug", "further"), SHAPES)
def test_approvers_of_is_the_four_eyes_rule_for_everybody(
    hold: Hold, people: dict[str, User], group: str, extra: str, escalation: str, tenant_slug: str, further: str
) -> None:
    # given a request of alice's, shaped in memory as an operator or the policy could have shaped it
    request = hold()
    request.approver_group = Group.objects.get(name="approvers") if group == "group" else None
    request.approver_permission = EXTRA_PERMISSION if extra == "extra" else ""
    request.escalation_group = Group.objects.get(name="fallback")
    request.escalated_at = timezone.now() - timedelta(minutes=1) if escalation == "escalated" else None
    request.tenant = tenant_slug
    request.further_restrictions = [
        {**item, "group": Group.objects.get(name=item["group"]).pk} if item.get("group") else item
        for item in FURTHER[further]
    ]

    # when everybody who may decide it is asked for at once, under the governance its caller read (a page's scope,
    # the decision path's lock read): the tool's groups as they govern it now are part of the answer
    with governance_scope(), CaptureQueriesContext(connection) as queries:
        answer = [user.username for user in approvers_of(request)]

    # then it is exactly whom the rule lets decide, in one query
    assert answer == _by_the_rule(request)
    assert len(queries.captured_queries) == 1


def test_the_answer_names_the_expected_people_for_a_plain_and_a_grouped_request(
    hold: Hold, people: dict[str, User]
) -> None:
    # a plain request of acme: its tenant's deciders and those who cross tenants, never the requester
    request = hold()
    assert [user.username for user in approvers_of(request)] == [
        "operator",
        "cross-tenant",
        "approver",
        "approver-without-extra",
        "fallback",
        "superuser-with",
    ]

    # a request for the approvers group that asks the extra permission, escalated to the fallback group
    request.approver_group = Group.objects.get(name="approvers")
    request.approver_permission = EXTRA_PERMISSION
    request.escalation_group = Group.objects.get(name="fallback")
    request.escalated_at = timezone.now()
    assert [user.username for user in approvers_of(request)] == ["approver", "fallback", "superuser-with"]
