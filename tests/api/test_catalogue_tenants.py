"""The catalogue of a member of several tenants: without ``?tenant=``, the tools they may call in one of them.

A call is made in one tenant (without one, a member of several is refused), so each tenant is checked on its own:
a tool every one of their tenants denies is never listed, and a tool one of them allows is.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.disclosure import sample_tools
from tests.tenancy.conftest import make_user
from toolhub.models import Grant, GrantEffect, Tenant
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


@pytest.fixture
def member_of_both(settings: Any, tenant: Tenant, other_tenant: Tenant) -> Iterator[User]:
    """A member of globex and acme; nothing is granted without a grant."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    user = make_user("member-of-both", tenant=other_tenant)
    user.tenant_memberships.create(tenant=tenant)
    with registry.temporarily(*sample_tools.FACADES):
        yield user


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _listed(user: User, query: str = "") -> set[str]:
    return {tool["function"]["name"] for tool in client_for(user).get(f"/api/v1/tools/export/openai/{query}").json()}


def test_a_tool_allowed_in_one_tenant_is_listed_and_one_denied_in_every_tenant_is_not(
    member_of_both: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    Grant.objects.create(tool_name="calculate", tenant=tenant)
    Grant.objects.create(tool_name="query_table", user=member_of_both)
    for denying in (tenant, other_tenant):
        Grant.objects.create(tool_name="query_table", tenant=denying, effect=GrantEffect.DENY)

    assert _listed(member_of_both) == {"calculate"}
    assert _listed(member_of_both, "?tenant=acme") == {"calculate"}
    assert _listed(member_of_both, "?tenant=globex") == set()


def test_a_by_category_facade_offers_the_categories_open_in_one_of_their_tenants(
    member_of_both: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    for name, granted_to in (("file_operations", tenant), ("file_operations", other_tenant)):
        Grant.objects.create(tool_name=name, tenant=granted_to)
    Grant.objects.create(tool_name="query_table", tenant=tenant)  # read, in acme
    Grant.objects.create(tool_name="insert_record", tenant=other_tenant)  # write, in globex

    def categories(query: str) -> list[str]:
        response = client_for(member_of_both).get(f"/api/v1/tools/export/openai/{query}").json()
        facade = next(tool["function"] for tool in response if tool["function"]["name"] == "file_operations")
        return facade["parameters"]["properties"]["category"]["enum"]

    assert categories("") == ["read", "write"]
    assert categories("?tenant=acme") == ["read"]
    assert categories("?tenant=globex") == ["write"]
