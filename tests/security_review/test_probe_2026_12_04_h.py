"""Probe of the newest fixes (2026-12-04, h): platform grants (migration toolhub 0023) and the remote MCP client.

1. ``toolhub/migrations/0023_grant_set_by_platform.mark_tenant_made_grants`` reads only the admin's ADDITION
   entries. A platform grant a tenant's developer *changed* before the upgrade (the hole the fix closes: "a
   developer could delete, or flip to allow, a deny the platform set") stays ``set_by_platform=True``: the
   tenant's edit becomes the platform's, allows a built-in tool, and is read-only to that tenant from then on.
2. The same function calls everyone who is not a superuser a tenant's staff, though ``tenant_scope`` lets a
   holder of ``toolhub.cross_tenant`` (the platform team, ``platform_user``) cross tenants: the grants they set
   become the tenant's after the upgrade, so a deny the platform team set for a tenant is deleted by that
   tenant's developer, and their allow grants of built-in tools stop working.
3. ``toolhub/mcp_client/remote.py`` ``_run`` takes the server's URL out of an error only as the whole literal
   string: a server that echoes the key its URL carries (``?key=...``: "platform configuration, often carrying
   a key") in its error gives it to the member, the model and the audit trail.
"""

import importlib
import json
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from django.apps import apps as django_apps
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from tests.builtins.conftest import CallBuiltin, call_builtin, refusal, root  # noqa: F401 - fixtures
from tests.builtins.conftest import builtins as builtins  # noqa: F401 - fixture
from tests.helpers import RequestCall, console
from tests.mcpclient.fake_server import FakeCrm, serving
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import AuditEvent, CallStatus, Grant, GrantEffect, Tenant, ToolDefinition

pytestmark = pytest.mark.django_db

_mark_tenant_made_grants = importlib.import_module(
    "toolhub.migrations.0023_grant_set_by_platform"
).mark_tenant_made_grants


def _upgrade() -> None:
    """As the database stood before toolhub 0023 (every grant defaulted to the platform's), then the migration."""
    Grant.objects.update(set_by_platform=True)
    _mark_tenant_made_grants(django_apps, None)


def _grant_form(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    return {"effect": "allow", "note": "", "tool_name": "", "tool_group": "", "tenant": tenant.pk, **fields}


@pytest.fixture
def acme_developer(tenant: Tenant, roles: Any) -> User:
    return make_user("acme-dev-h", tenant=tenant, staff=True, groups=(roles["developers"],))


@pytest.mark.usefixtures("builtins")
def test_migration_0023_keeps_a_platform_grant_a_tenants_developer_flipped_before_the_upgrade_as_the_platforms(
    acme_developer: User,
    tenant: Tenant,
    superuser: User,
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
) -> None:
    """The platform denied acme ``list_directory`` (an admin ADDITION by a superuser). Before the fix, acme's
    developer flipped it to allow on the grant's change page (a CHANGE entry by a non-superuser). The upgrade
    reads additions only: the flipped row is "the platform's", so acme runs the built-in tool, and acme's
    staff can no longer change it back. Fix: a grant whose last admin change (or addition) was by someone who
    does not cross tenants is the tenant's (``set_by_platform=False``)."""
    ToolDefinition.objects.filter(name="list_directory").update(risk_override="low")
    added = console(superuser).post(
        "/admin/toolhub/grant/add/", _grant_form(tenant, effect="deny", tool_name="list_directory")
    )
    assert added.status_code == 302
    grant = Grant.objects.get(tool_name="list_directory", tenant=tenant)
    # What the pre-fix admin let acme's developer do, and the history entry it wrote.
    Grant.objects.filter(pk=grant.pk).update(effect=GrantEffect.ALLOW)
    LogEntry.objects.create(
        user=acme_developer,
        content_type=ContentType.objects.get_for_model(Grant),
        object_id=str(grant.pk),
        object_repr=str(grant),
        action_flag=CHANGE,
        change_message='[{"changed": {"fields": ["Effect"]}}]',
    )

    _upgrade()

    grant.refresh_from_db()
    call = call_builtin("list_directory", {})
    assert grant.set_by_platform is False, f"a tenant's edit is the platform's grant now; the built-in: {call.status}"
    assert call.status != CallStatus.SUCCEEDED and refusal(call)["code"] == "not_granted"


def test_migration_0023_hands_a_deny_set_by_a_cross_tenant_platform_member_to_the_tenants_staff(
    acme_developer: User, tenant: Tenant, platform_user: User
) -> None:
    """The platform team member (staff, ``toolhub.cross_tenant``, not a superuser) denies acme ``debit``. The
    upgrade reads "not a superuser" as "a tenant's staff": the deny becomes acme's, and acme's developer
    deletes it. Fix: classify by the same rule as ``GrantAdmin.save_model`` (``tenant_scope(...).everything``:
    superuser or ``toolhub.cross_tenant``, the permission held directly or through a group)."""
    form = _grant_form(tenant, effect="deny", tool_name="debit")
    added = console(platform_user).post("/admin/toolhub/grant/add/", form)
    assert added.status_code == 302
    deny = Grant.objects.get(tool_name="debit", tenant=tenant)
    assert deny.set_by_platform is True  # as the fixed admin records it
    assert LogEntry.objects.filter(object_id=str(deny.pk), action_flag=ADDITION, user=platform_user).exists()

    _upgrade()

    deny.refresh_from_db()
    deleted = console(acme_developer).post(f"/admin/toolhub/grant/{deny.pk}/delete/", {"post": "yes"})
    assert deny.set_by_platform is True, f"the platform team's deny is acme's now; acme's delete: {deleted.status_code}"
    assert deleted.status_code == 403 and Grant.objects.filter(pk=deny.pk).exists()


# --- a remote server echoing its URL's key -------------------------------------------------------------------

TOOL = "crm__lookup_customer"
URL_KEY = "urlkey-9b4e1d7a3c"


class _EchoingCrm(FakeCrm):
    """Refuses a customer with an error that quotes the key of the URL it was called at (an auth layer's
    "key ... may not read customer ..."): the server's own words, not a library quoting the URL."""

    def server(self) -> Server[Any]:
        fake = self

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult.model_validate(
                {
                    "tools": [
                        {
                            "name": "lookup_customer",
                            "description": fake.description,
                            "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
                        }
                    ]
                }
            )

        async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
            key = ctx.request.query_params.get("key")
            customer = (params.arguments or {}).get("customer_id")
            raise MCPError(-32602, f"api key {key} may not read customer {customer}")

        return Server("probe-crm-h", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.fixture
def echoing_server(tenant: Tenant, operator: User, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with serving(_EchoingCrm()) as url:
        monkeypatch.setenv("CRM_TOKEN_ACME_H", "token-acme-h-1a2b3c4d")
        server = RemoteMcpServer.objects.create(name="crm", url=f"{url}?key={URL_KEY}", risk="low")
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME_H")
        remote_server_sync(server=server, actor="operator:platform")
        remote_tool_accept(row=RemoteMcpTool.objects.get(tool_name=TOOL), actor="operator:platform", user=operator)
        yield url


def test_a_remote_servers_error_echoing_its_urls_key_reaches_the_member_and_the_audit_trail(
    echoing_server: str, alice: User, request_call: RequestCall
) -> None:
    """Found: ``toolhub/mcp_client/remote.py`` ``_run`` replaces only the literal URL (and the URL without its
    query) in ``str(first)``; the provider's scrubber (``credential_scrubber``) holds the tenant's header
    credential only. Fix: scrub the URL's secret parts (query values, userinfo, path) as credentials, in
    errors, results and listed definitions, or keep the remote error's detail in the server log only."""
    call = request_call(TOOL, {"customer_id": "c-1"}, alice, tenant="acme")

    assert call.status == "failed"
    answer = client_for(alice).get(f"/api/v1/calls/{call.id}/").content.decode()
    stored = json.dumps(list(AuditEvent.objects.filter(call_id=call.id).values_list("data", flat=True)))
    shown = (("call.error", call.error), ("API", answer), ("audit", stored))
    leaked = [where for where, text in shown if URL_KEY in text]
    assert leaked == [], f"the URL's key is shown on: {leaked} ({call.error!r})"
