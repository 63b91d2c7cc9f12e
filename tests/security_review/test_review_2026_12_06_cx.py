"""Review of 2026-12-06 (cx): review of reviews bq, cd, ch on remote MCP schemas, and the MCP client side.

Each test fails on the reviewed code (main at ea55f42) and states what was found and what is expected.

Findings:

1. A remote tool's ``outputSchema`` was not pinned: a server could change it after an administrator accepted the
   tool (drop a bound, widen a type, add a property the model then reads) and every call went on, never
   quarantined. ``outputSchema`` is now among ``PINNED_FIELDS``: a change quarantines the tool as a changed
   description does (refused, audited, shown in the diff, accepted anew); a migration re-hashes the stored
   definitions (which hold the output schema as listed when accepted), so no accepted tool is quarantined by the
   change of hash alone.
"""

import importlib
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import AuditEvent, Tenant

TOOL = "crm__grade"

_OUTPUT = {
    "type": "object",
    "properties": {"customer": {"type": "string", "maxLength": 20}, "tier": {"enum": ["gold", "silver"]}},
    "required": ["customer", "tier"],
    "additionalProperties": False,
}

_GRADE: dict[str, Any] = {
    "name": "grade",
    "description": "Grades a customer.",
    "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]},
    "outputSchema": _OUTPUT,
    "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
}


def _accepted_grade(url: str, operator: User, monkeypatch: pytest.MonkeyPatch) -> RemoteMcpTool:
    monkeypatch.setenv("CRM_TOKEN_ACME", "token-acme")
    server = RemoteMcpServer.objects.create(name="crm", url=url, risk="low", select_names=["grade"])
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
    remote_server_sync(server=server, actor="operator:operator")
    return remote_tool_accept(row=RemoteMcpTool.objects.get(tool_name=TOOL), actor="operator:operator", user=operator)


#: What a server may change under an accepted tool, and the pinned field the quarantine names.
CHANGES: dict[str, tuple[dict[str, Any], str]] = {
    "output schema widened": ({"outputSchema": {"type": "object"}}, "outputSchema"),
    "output schema dropped": ({"outputSchema": None}, "outputSchema"),
    "read-only hint lowered": ({"annotations": {"readOnlyHint": False}}, "annotations"),
    "destructive hint lowered": (
        {"annotations": {"readOnlyHint": True, "destructiveHint": True, "idempotentHint": True}},
        "annotations",
    ),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_change_to_an_accepted_output_schema_or_annotations_quarantines_the_tool(
    case: str, tenant: Tenant, operator: User, alice: User, request_call: RequestCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``outputSchema`` was not pinned: a server changed it after acceptance and calls went on (the
    annotations were pinned and hold).

    Expect: the call after the change fails as quarantined, naming the changed field; nothing is sent with the
    changed definition; the quarantine is audited; the next call is refused until an administrator accepts it.
    """
    change, field = CHANGES[case]
    fake = FakeCrm()
    fake.extra_tools = [_GRADE]
    with serving(fake) as url:
        _accepted_grade(url, operator, monkeypatch)
        assert request_call(TOOL, {"customer_id": "c-1"}, alice, tenant="acme").status == "succeeded"

        fake.extra_tools = [{key: value for key, value in {**_GRADE, **change}.items() if value is not None}]
        changed = request_call(TOOL, {"customer_id": "c-2"}, alice, tenant="acme")

        assert changed.status == "failed"
        assert "quarantined" in changed.error and field in changed.error
        assert fake.calls == [{"customer_id": "c-1"}]
        assert RemoteMcpTool.objects.get(tool_name=TOOL).status == "quarantined"
        assert AuditEvent.objects.get(event_type="remote_mcp.tool_quarantined").payload["changed"] == [field]
        assert request_call(TOOL, {"customer_id": "c-3"}, alice, tenant="acme").status == "denied"
        assert fake.calls == [{"customer_id": "c-1"}]


def test_pinning_the_output_schema_leaves_accepted_tools_callable(
    tenant: Tenant, operator: User, alice: User, request_call: RequestCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: pinning ``outputSchema`` changes every stored hash; without re-hashing, every accepted remote tool
    would be quarantined at its next call though its server changed nothing.

    Expect: the migration re-hashes the accepted and offered definitions as stored (the accepted one holds the
    output schema as listed when accepted), and the tool stays callable.
    """
    fake = FakeCrm()
    fake.extra_tools = [_GRADE]
    with serving(fake) as url:
        row = _accepted_grade(url, operator, monkeypatch)
        # The hashes as the code before the pin computed them (no output schema).
        before = {key: value for key, value in row.accepted_definition.items() if key != "outputSchema"}
        RemoteMcpTool.objects.filter(pk=row.pk).update(
            accepted_hash=definition_hash(before), current_hash=definition_hash(before)
        )

        migration = importlib.import_module("toolhub.migrations.0043_remote_tool_output_schema_pinned")
        migration.rehash_remote_tools(apps, None)

        row.refresh_from_db()
        assert row.accepted_hash == row.current_hash == definition_hash(_GRADE)
        call = request_call(TOOL, {"customer_id": "c-1"}, alice, tenant="acme")
        assert call.status == "succeeded", call.error
        assert RemoteMcpTool.objects.get(tool_name=TOOL).status == "active"
