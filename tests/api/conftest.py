"""Fixtures of the API tests: more users and clients, agents, and requests that run what they commit."""

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import Agent
from agents_app.services import agent_create
from tests.agents.conftest import make_developer
from tests.tenancy.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    acme_auditor,
    acme_operator,
    carol,
    globex_operator,
    roles,
)
from toolhub.models import Tenant, TenantMembership

ORDER_SCRIPT = [
    {"tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"content": "Order placed: {last_tool_result}"},
]


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def bob(other_tenant: Tenant) -> User:
    """A user of another tenant, who is neither staff nor an operator."""
    user = User.objects.create_user("bob", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


@pytest.fixture
def developer(tenant: Tenant) -> User:
    """A member of acme in the developers group, who may create and change agents."""
    return make_developer("dev", tenant)


@pytest.fixture
def developer_client(developer: User) -> APIClient:
    return client_for(developer)


@pytest.fixture
def viewer_client(viewer: User) -> APIClient:
    return client_for(viewer)


@pytest.fixture
def bob_client(bob: User) -> APIClient:
    return client_for(bob)


@pytest.fixture
def order_agent(db: None) -> Agent:
    """The demo's order agent: its model orders a 5000 laptop, which needs an operator's approval."""
    return agent_create(
        name="order-demo", provider="scripted", script=ORDER_SCRIPT, tools=["create_order", "get_order"]
    )
