"""Fixtures for the approval suites: calls that need two approvers, a third operator, a tool with a secret."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import ApprovalRequest, ApprovalRule
from tests.helpers import RequestCall
from tests.testapp.models import SideEffect
from toolhub import registry, tool
from toolhub.models import Tenant, TenantMembership, ToolDefinition

Hold = Callable[..., ApprovalRequest]


@tool(sensitive=("password",), risk="critical")
def rotate_secret(username: str, password: str) -> dict[str, Any]:
    """Set a new password for a user of a downstream system (critical: two approvers)."""
    SideEffect.objects.create(call_id="", tool="rotate_secret", note=f"{username}:{password}")
    return {"rotated": username}


@pytest.fixture
def third_operator(operator: User, tenant: Tenant) -> User:
    user = User.objects.create_user("operator3", "operator3@example.com", "operator3-password", is_staff=True)
    user.groups.add(Group.objects.get(name="operators"))
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def hold(request_call: RequestCall, alice: User) -> Hold:
    """Hold a call of alice's (tenant acme) for approval; ``approvers=2`` makes its tool critical.

    ``only_this``: two approvers by an operators' rule matching this note instead, since raising the tool to critical
    holds the requests already pending to two approvers as well.
    """

    def held(
        note: str = "pay 5000", *, approvers: int = 1, user: User | None = None, only_this: bool = False
    ) -> ApprovalRequest:
        if approvers == 2 and only_this:
            ApprovalRule.objects.create(
                name=f"two for {note}",
                tool_name="risky_effect",
                argument="note",
                operator="==",
                value=note,
                required_approvals=2,
            )
        elif approvers == 2:
            ToolDefinition.objects.filter(name="risky_effect").update(risk_override="critical")
        call = request_call("risky_effect", {"note": note}, user or alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        assert request.required_approvals == approvers
        return request

    return held


@pytest.fixture
def secret_tool() -> Iterator[None]:
    """``rotate_secret`` registered for the test."""
    with registry.temporarily(rotate_secret):
        yield
