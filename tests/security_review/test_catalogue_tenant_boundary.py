"""``GET /api/v1/tools/?tenant=`` goes through the shared tenant boundary (``toolhub.tenancy.tenant_scope``).

Before, it checked memberships itself: a superuser or a holder of ``toolhub.cross_tenant`` was refused
a tenant they were not a member of, though the boundary lets them act for every tenant.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub.models import Grant, Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _deny_by_default(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}


def exported(user: User, tenant: str) -> Any:
    return client_for(user).get(f"/api/v1/tools/export/openai/?tenant={tenant}")


def test_a_cross_tenant_holder_lists_the_tools_of_a_tenant_they_are_not_in(tenant: Tenant) -> None:
    # given acme may use calculate, and a platform person who is a member of no tenant
    Grant.objects.create(tool_name="calculate", tenant=tenant)
    platform = make_user("platform-reader", permissions=("toolhub.cross_tenant",))

    # when
    response = exported(platform, "acme")

    # then
    assert response.status_code == 200, response.content
    assert {tool["function"]["name"] for tool in response.json()} == {"calculate"}


def test_a_superuser_lists_the_tools_of_any_existing_tenant(tenant: Tenant, superuser: User) -> None:
    response = exported(superuser, "acme")

    assert response.status_code == 200, response.content
    assert {tool["function"]["name"] for tool in response.json()} >= {"calculate"}


def test_a_missing_tenant_and_another_members_tenant_answer_alike(
    tenant: Tenant, globex_user: User, superuser: User
) -> None:
    # when: a member of globex asks for acme, and anyone asks for a tenant that does not exist
    answers = [exported(globex_user, "acme"), exported(globex_user, "nope"), exported(superuser, "nope")]

    # then: the same 400, nothing listed
    assert {response.status_code for response in answers} == {400}
    # one text, the tenant named echoed (review 2026-12-07 r: every request naming a tenant reads it so)
    assert [response.json() for response in answers] == [
        {"detail": f"You are not a member of tenant {name!r}; give the slug of one of yours."}
        for name in ("acme", "nope", "nope")
    ]
