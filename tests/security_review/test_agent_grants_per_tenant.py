"""A grant to an agent can be bound to a tenant: agent names are unique only within a tenant.

Before, ``Grant.agent_name`` matched a same-named agent in every tenant: denying agent "x" a tool for
tenant acme denied it to globex's agent "x" too, and an allow meant for one was given to both.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError
from django.test import Client

from tests.helpers import principal_for
from toolhub.authorization import authorization_denial
from toolhub.models import Grant, GrantEffect, Tenant

pytestmark = pytest.mark.django_db

TOOL = "calculate"


@pytest.fixture(autouse=True)
def _users_may_call(settings: Any) -> None:
    """The user's side allows everything: what is tested is the agent's side."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "allow"}


def denial(user: User, tenant: str, agent_tools: frozenset[str]) -> str | None:
    return authorization_denial(TOOL, principal_for(user, tenant=tenant, agent_name="x", agent_tools=agent_tools))


def test_a_deny_to_agent_x_of_acme_leaves_globex_agent_x_alone(
    alice: User, globex_user: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    # given both agents "x" have the tool, and it is denied to acme's
    tools = frozenset({TOOL})
    assert denial(globex_user, "globex", tools) is None  # cached before the grant: the change must drop it
    Grant.objects.create(effect=GrantEffect.DENY, tool_name=TOOL, agent_name="x", agent_tenant=tenant)

    # when / then, in both orders so that neither tenant's cached grants serve the other
    assert denial(globex_user, "globex", tools) is None
    assert "denied to agent 'x'" in (denial(alice, "acme", tools) or "")
    assert denial(globex_user, "globex", tools) is None


def test_an_allow_to_agent_x_of_acme_gives_globex_agent_x_nothing(
    alice: User, globex_user: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    # given neither agent "x" has the tool in its list, and acme's is granted it
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name=TOOL, agent_name="x", agent_tenant=tenant)

    assert denial(alice, "acme", frozenset()) is None
    assert "not available to agent 'x'" in (denial(globex_user, "globex", frozenset()) or "")


def test_a_grant_to_agent_x_in_no_tenant_holds_in_every_tenant(
    alice: User, globex_user: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name=TOOL, agent_name="x")

    assert denial(alice, "acme", frozenset({TOOL})) is not None
    assert denial(globex_user, "globex", frozenset({TOOL})) is not None


def test_a_tenant_for_the_agent_needs_an_agent(tenant: Tenant) -> None:
    with pytest.raises(IntegrityError, match="grant_agent_tenant_needs_agent"):
        Grant.objects.create(tool_name=TOOL, tenant=tenant, agent_tenant=tenant)


def test_the_admin_binds_an_agent_grant_to_a_tenant(superuser: User, tenant: Tenant) -> None:
    client = Client()
    client.force_login(superuser)

    response = client.post(
        "/admin/toolhub/grant/add/",
        {"effect": "deny", "tool_name": TOOL, "agent_name": "x", "agent_tenant": str(tenant.pk), "note": ""},
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    grant = Grant.objects.get(agent_name="x")
    assert grant.agent_tenant == tenant
    assert str(grant) == "deny calculate to agent x in " + str(tenant)
