"""The tool catalogue's JSON list shows a person without a catalogue role only the tools they may call.

Before this review ``GET /api/v1/tools/`` listed every tool of the catalogue, with its schema, to any
logged-in user (disabled ones and those never granted to them), while the model, the provider exports
and tool search show only what the principal may use.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub.models import Grant, Tenant, ToolGroup

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _deny_by_default(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}


def listed(user: User, query: str = "") -> set[str]:
    response = client_for(user).get(f"/api/v1/tools/?page_size=500{query}")
    assert response.status_code == 200, response.content
    return {item["name"] for item in response.json()["results"]}


def test_a_member_lists_only_the_tools_granted_to_them(globex_user: User, other_tenant: Tenant) -> None:
    # given globex may use calculate and nothing else
    Grant.objects.create(tool_name="calculate", tenant=other_tenant)

    assert listed(globex_user) == {"calculate"}


def test_a_member_of_several_tenants_names_the_one_to_list_for(
    globex_user: User, other_tenant: Tenant, tenant: Tenant
) -> None:
    Grant.objects.create(tool_name="calculate", tenant=other_tenant)
    Grant.objects.create(tool_name="days_between", tenant=tenant)
    globex_user.tenant_memberships.create(tenant=tenant)

    assert listed(globex_user, "&tenant=acme") == {"days_between"}
    assert client_for(globex_user).get("/api/v1/tools/?tenant=nope").status_code == 400


def test_catalogue_roles_still_list_the_whole_catalogue(
    other_tenant: Tenant, roles: dict[str, Group], superuser: User
) -> None:
    ToolGroup.objects.get_or_create(name="utilities")
    auditor = make_user("globex-reader", tenant=other_tenant, staff=True, groups=(roles["auditors"],))

    everything = listed(superuser)
    assert {"calculate", "create_order", "debit"} <= everything
    assert listed(auditor) == everything
