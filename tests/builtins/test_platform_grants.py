"""Only the platform opens the server's disk and processes to a tenant, and a tenant cannot undo the platform's grants.

Found by the probe of 2026-12-04 (f): a tenant's developer could grant the built-in shell to their own tenant
(tenant grants are theirs), and a tenant operator then approve any command, run on workers every tenant
shares; and a developer could delete, or flip to allow, a deny the platform set for their tenant.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.builtins.conftest import NAMES, CallBuiltin, refusal
from tests.helpers import console
from tests.tenancy.conftest import make_user, roles, superuser  # noqa: F401 - fixtures
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolDefinition, ToolGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_developer(tenant: Tenant, roles: Any) -> User:  # noqa: F811 - the fixture
    return make_user("acme-dev", tenant=tenant, staff=True, groups=(roles["developers"],))


def _grant_form(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    return {"effect": "allow", "note": "", "tool_name": "", "tool_group": "", "tenant": tenant.pk, **fields}


@pytest.mark.usefixtures("builtins")
def test_a_tenants_developer_cannot_grant_a_built_in_tool_and_a_grant_they_made_allows_none(
    acme_developer: User, tenant: Tenant, call_builtin: CallBuiltin
) -> None:
    ToolDefinition.objects.filter(name__in=NAMES).update(risk_override="low")
    page = console(acme_developer)
    builtins_group = ToolGroup.objects.create(name="builtins")

    for target in ({"tool_name": "execute_shell_command"}, {"tool_group": builtins_group.pk}):
        response = page.post("/admin/toolhub/grant/add/", _grant_form(tenant, **target))
        assert response.status_code == 200, target  # the form again, with its error
        assert "only the platform grants them" in response.content.decode()
    assert not Grant.objects.filter(tenant=tenant).exists()
    # A deny is theirs to set: it only narrows what their tenant may do.
    denied = page.post("/admin/toolhub/grant/add/", _grant_form(tenant, effect="deny", tool_name="list_directory"))
    assert denied.status_code == 302
    assert Grant.objects.get(tenant=tenant).set_by_platform is False

    # A grant a tenant's staff made (before this rule, say) allows no built-in tool; the platform's does.
    Grant.objects.all().delete()
    Grant.objects.create(tenant=tenant, tool_name="list_directory", set_by_platform=False)
    assert refusal(call_builtin("list_directory", {}))["code"] == "not_granted"
    Grant.objects.create(tenant=tenant, tool_name="list_directory")
    assert call_builtin("list_directory", {}).status == CallStatus.SUCCEEDED


def test_a_deny_the_platform_set_for_a_tenant_is_read_only_to_that_tenants_staff(
    acme_developer: User,
    tenant: Tenant,
    superuser: User,  # noqa: F811 - the fixture
) -> None:
    platform = console(superuser)
    assert (
        platform.post("/admin/toolhub/grant/add/", _grant_form(tenant, effect="deny", tool_name="debit")).status_code
        == 302
    )
    deny = Grant.objects.get(tool_name="debit")
    assert deny.set_by_platform is True

    page = console(acme_developer)
    flipped = page.post(f"/admin/toolhub/grant/{deny.pk}/change/", _grant_form(tenant, tool_name="debit"))
    deleted = page.post(f"/admin/toolhub/grant/{deny.pk}/delete/", {"post": "yes"})
    bulk = page.post(
        "/admin/toolhub/grant/", {"action": "delete_selected", "_selected_action": [deny.pk], "post": "yes"}
    )

    assert flipped.status_code == 403 and deleted.status_code == 403 and bulk.status_code in (200, 302, 403)
    assert Grant.objects.get(pk=deny.pk).effect == GrantEffect.DENY  # it holds, as the platform set it

    # Their own grants stay theirs to change and delete.
    own = page.post("/admin/toolhub/grant/add/", _grant_form(tenant, tool_name="send_notification"))
    assert own.status_code == 302
    mine = Grant.objects.get(tool_name="send_notification")
    assert page.post(f"/admin/toolhub/grant/{mine.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Grant.objects.filter(pk=mine.pk).exists()
