"""Review of 2026-12-06 (cx): review of reviews bq, cd, ch on remote MCP schemas, and the MCP client side.

Each test fails on the reviewed code (main at ea55f42) and states what was found and what is expected.

Findings:

1. A remote tool's ``outputSchema`` was not pinned: a server could change it after an administrator accepted the
   tool (drop a bound, widen a type, add a property the model then reads) and every call went on, never
   quarantined. ``outputSchema`` is now among ``PINNED_FIELDS``: a change quarantines the tool as a changed
   description does (refused, audited, shown in the diff, accepted anew); a migration re-hashes the stored
   definitions (which hold the output schema as listed when accepted), so no accepted tool is quarantined by the
   change of hash alone.
2. The schema bounds cap the schemas ONE value is checked against (``MAX_SCHEMA_APPLICATIONS`` = 10,000), not the
   work of a check: every array item and property is such a value. An input schema within the bounds (a ``$ref``
   fan-out of 10 levels under ``items``) took about 200 s of a web process for 1,000 integers (4 KB of arguments).
   Every keyword a validator applies now counts against one ``validation_budget`` per check
   (``MAX_VALIDATION_STEPS`` = 50,000, a few seconds); past it the arguments are refused, saying why.
3. The same for a remote tool's structured result against its ``outputSchema`` (synchronous in the worker, past
   ``anyio.fail_after``): the SDK's iteration of the errors now runs within one budget and fails the result.

Checked and holding:

- A server lowering an accepted tool's ``readOnlyHint`` or raising ``destructiveHint`` (``annotations`` are
  pinned) quarantines it (tests below); a remote tool's risk is its server's ``risk``, never its annotations, and
  ``idempotentHint`` (which allows retries) is read from the accepted definition only.
- A server renaming a pinned tool: the old name is marked removed (not callable) and the new one waits for
  acceptance as a new tool (``remote_server_sync``: ``seen``/``exclude``); a call of the old name re-lists and
  refuses ("no longer offers") without calling.
- Another tenant's registration: a listing is per server (one configuration, platform-wide); each call re-lists
  with the calling tenant's own credential and calls only if that listing hashes to the accepted pin, so a server
  showing one tenant other tools gets nothing called for it outside the pin.
- A huge remote result is cut at the wire (``bounded_async_responses``) and refused past
  ``MAX_EXTERNAL_RESULT_BYTES`` after the credential is scrubbed.

Left open:

- A schema whose one bad value fails many leaves of a fan-out reports each (1,024 identical "minimum" errors for
  one item here): the message is bounded by the budget but repetitive; errors are not de-duplicated.
- A hostile server's accepted tools still cost up to ~20 s each of pattern-weight probing at the first build of
  the registry's remote entries (review cd); no per-server/per-listing probe budget was added (time).
- The output check still relies on the SDK's private ``_output_schema_validator``/``_tool_output_validators``.
"""

import importlib
import time
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from pydantic import ValidationError

from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.remote import RemoteServerError, remote_call, remote_tools
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import AuditEvent, Tenant
from toolhub.tools.definition import Tool

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

        migration = importlib.import_module("toolhub.migrations.0044_remote_tool_output_schema_pinned")
        migration.rehash_remote_tools(apps, None)

        row.refresh_from_db()
        assert row.accepted_hash == row.current_hash == definition_hash(_GRADE)
        call = request_call(TOOL, {"customer_id": "c-1"}, alice, tenant="acme")
        assert call.status == "succeeded", call.error
        assert RemoteMcpTool.objects.get(tool_name=TOOL).status == "active"


def _fan_out(levels: int) -> dict[str, Any]:
    """``a0: allOf [a1, a1]``... : 2**levels checks of one value, within ``MAX_SCHEMA_APPLICATIONS`` for 10 levels."""
    defs: dict[str, Any] = {
        f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(levels)
    }
    defs[f"a{levels}"] = {"type": "integer", "minimum": 0}
    return defs


_FANNED_ITEMS: dict[str, Any] = {
    "type": "object",
    "properties": {"xs": {"type": "array", "items": {"$ref": "#/$defs/a0"}}},
    "$defs": _fan_out(10),
}


def test_checking_many_items_against_a_schema_within_bounds_is_bounded_as_a_whole() -> None:
    """Found: the schema bound caps the schemas one value is checked against (10,000), not the work of a call:
    each array item is such a value, and 1,000 integers (4 KB of arguments) against an accepted ``$ref`` fan-out
    of 10 levels took about 200 s of the process validating them (a web request).

    Expect: the check stops at ``MAX_VALIDATION_STEPS`` and refuses the arguments within seconds, saying why;
    a few items are still checked as before.
    """
    tool = Tool.create("fanned", "Fanned.", _FANNED_ITEMS, lambda arguments: arguments, allow_any=True)
    assert tool.validate_arguments({"xs": [1, 2]}) == {"xs": [1, 2]}
    with pytest.raises(ValidationError, match="satisfy minimum 0"):
        tool.validate_arguments({"xs": [-1]})

    started = time.monotonic()
    with pytest.raises(ValidationError, match="send fewer items"):
        tool.validate_arguments({"xs": list(range(1000))})
    assert time.monotonic() - started < 5


def test_checking_a_remote_result_of_many_items_is_bounded_as_a_whole() -> None:
    """Found: the same for a remote tool's structured result, checked against its ``outputSchema`` in the worker
    (synchronous, past ``anyio.fail_after``): each item of a listed array is checked against the whole fan-out.

    Expect: the result is refused within seconds as one whose check took too many steps.
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {
            "name": "grade",
            "description": "Grades customers.",
            "inputSchema": {"type": "object"},
            "outputSchema": {
                "type": "object",
                "properties": {"customer": {"type": "array", "items": {"$ref": "#/$defs/a0"}}},
                "$defs": _fan_out(10),
            },
        }
    ]
    with serving(fake) as url:
        listed = next(tool for tool in remote_tools(url, name="crm", headers={}, timeout=30) if tool["name"] == "grade")
        started = time.monotonic()
        with pytest.raises(RemoteServerError, match="took more than"):
            remote_call(
                url,
                name="crm",
                headers={},
                timeout=30,
                remote_name="grade",
                arguments={"customer_id": list(range(1000))},
                meta={},
                accepted_hash=definition_hash(listed),
            )
        assert time.monotonic() - started < 10
