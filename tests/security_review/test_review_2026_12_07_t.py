"""Review 2026-12-07 (t): bad input on the entrances earlier reviews had not reached: the admin's edit forms, the MCP
server, the agent loop's model output and subagents.

Each finding's test fails on the code as found (main at 66111ef) and says what was found and what is expected.

Findings:

1. Every JSON column of an admin edit form (an agent's ``script`` and ``tools``, an approval rule's ``value``, a tool
   group's ``extra_tools``, ``capabilities`` and ``activation_rules``, a remote MCP server's ``select_names`` and
   ``meta_keys``) was Django's ``forms.JSONField``, which decodes what was posted with a bare ``json.loads`` to clean
   it and again to show it back (``bound_data``): a value nested 3,000 deep (``RecursionError``), an integer of
   5,000 digits (``int()``'s ``ValueError``) or the escape ``"\\ud800"`` (a lone surrogate the page cannot be written
   out with) answered 500, for a developer of one tenant on their own agents and rules as for the platform's staff.
   Every model ``JSONField`` of a console form is now ``toolhub.admin_json.CheckedJSONFormField`` (mixed into the
   admins' bases ``TenantScopedAdmin``, ``CrossTenantOnly`` and ``CrossTenantChangesOnly`` by
   ``CheckedJSONFields``): it decodes through ``toolhub.json_intake.json_loads_checked`` (``MAX_REQUEST_NESTING``,
   storable text and numbers), so such a value is an error at its field, worded as the REST API words it with what
   to do, the text shown back as posted, and nothing is saved.
   ``test_hostile_json_in_an_agents_form_is_refused_at_its_field``,
   ``test_hostile_json_in_an_approval_rules_forms_is_refused_at_its_field``,
   ``test_hostile_json_in_the_platforms_forms_is_refused_at_its_field``.
2. (PostgreSQL) ``tools/call`` over MCP (2025-03-26, where the body's name needs no ``Mcp-Name`` header) of a tool
   named with 199 characters and a NUL answered "Internal server error" (-32603) and recorded nothing: the pipeline
   cut the name to the column's 200 characters and then escaped it (``storable_text``: a NUL is six characters), so
   the row's name was 205 characters and PostgreSQL refused the insert. The same held for ``model_call_id`` (100)
   and for any door calling the pipeline with such a name. ``storable_text`` now takes the column's length
   (``within=``) and cuts after escaping; the call is recorded ``invalid`` and the client told the bounded "Unknown
   tool ..." with its suggestions. ``test_an_mcp_call_of_a_long_name_ending_in_a_nul_is_refused_and_recorded``.

Checked and holding:
"""

import json
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents_app.models import Agent
from approvals.models import ApprovalRule
from tests.helpers import assert_audit_intact, console
from tests.mcp.conftest import live_asgi, token  # noqa: F401 - the live server, a fixture
from tests.security_review.test_review_2026_12_05_cg import _FormAsPosted
from tests.testapp.models import SideEffect
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.models import CallStatus, Grant, Tenant, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

#: JSON texts no JSON column of a console form may take, and what its field then says (in part).
HOSTILE_JSON = {
    "[" * 3000 + "]" * 3000: "nests lists and objects 3000 levels deep",
    "[" + "9" * 5000 + "]": "an integer with more than",
    '[{"content": "\\ud800"}]': "cannot be stored",
    '{"a": 1e309}': "is not a finite number",
    '{"key\\u0000": "x"}': "cannot be stored",
}


def _form(client: Client, url: str) -> dict[str, str]:
    page = client.get(url)
    assert page.status_code == 200, url
    parser = _FormAsPosted(form_id=f"{page.context['opts'].model_name}_form")
    parser.feed(page.content.decode())
    return parser.posted()


def _refused_at(client: Client, url: str, posted: dict[str, Any], field: str, said: str) -> None:
    """``url`` answers its form again (200, no traceback), with the refusal at ``field`` naming what to do."""
    answer = client.post(url, {**posted, "_save": "Save"})
    assert answer.status_code == 200, (field, answer.status_code)
    errors = answer.context["adminform"].form.errors
    assert field in errors, (field, dict(errors))
    (message,) = errors[field]
    assert said in message and "nothing was saved" in message, message
    assert "Traceback" not in answer.content.decode()


def test_hostile_json_in_an_agents_form_is_refused_at_its_field(globex_developer: User, other_tenant: Tenant) -> None:
    """Found: a developer of one tenant adding an agent whose ``script`` or ``tools`` was JSON nested 3,000 deep, an
    integer of 5,000 digits or the escape ``"\\ud800"`` got a 500 (``RecursionError``, ``ValueError``,
    ``UnicodeEncodeError`` writing the page back).
    Expect: the form again, the refusal at the field (bounded words, what to do), no agent saved; an agent whose
    JSON is fine is still saved."""
    client = console(globex_developer)
    url = "/admin/agents_app/agent/add/"
    posted = {**_form(client, url), "name": "t-agent", "tenant": str(other_tenant.pk), "tools": "[]", "script": "[]"}
    for field in ("script", "tools"):
        for text, said in HOSTILE_JSON.items():
            _refused_at(client, url, {**posted, field: text}, field, said)
    assert not Agent.objects.exists()
    saved = client.post(url, {**posted, "script": json.dumps([{"content": "hello"}]), "_save": "Save"})
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    assert Agent.objects.get().script == [{"content": "hello"}]


def test_hostile_json_in_an_approval_rules_forms_is_refused_at_its_field(
    globex_developer: User, other_tenant: Tenant
) -> None:
    """Found: the same 500s on an approval rule's ``value`` (its add page and the change page of the tenant's rule).
    Expect: refused at ``value`` on both pages; no rule added, the rule's stored value unchanged."""
    rule = ApprovalRule.objects.create(name="t-rule", tenant=other_tenant, tool_name="", argument="", value=None)
    client = console(globex_developer)
    for url in ("/admin/approvals/approvalrule/add/", f"/admin/approvals/approvalrule/{rule.pk}/change/"):
        posted = {**_form(client, url), "name": "t-rule-2", "tenant": str(other_tenant.pk)}
        for text, said in HOSTILE_JSON.items():
            _refused_at(client, url, {**posted, "value": text}, "value", said)
    (kept,) = ApprovalRule.objects.all()
    assert (kept.name, kept.value) == ("t-rule", None)


def test_hostile_json_in_the_platforms_forms_is_refused_at_its_field(superuser: User) -> None:
    """Found: the same 500s on the platform's forms: a tool group's ``extra_tools``, ``capabilities`` and
    ``activation_rules``, a remote MCP server's ``select_names`` and ``meta_keys``.
    Expect: refused at the field; nothing saved."""
    client = console(superuser)
    cases = {
        "/admin/toolhub/toolgroup/add/": ("extra_tools", "capabilities", "activation_rules"),
        "/admin/toolhub/remotemcpserver/add/": ("select_names", "meta_keys"),
    }
    for url, fields in cases.items():
        posted = {**_form(client, url), "name": "t-thing", "url": "https://crm.example.com/mcp"}
        for field in fields:
            for text, said in HOSTILE_JSON.items():
                _refused_at(client, url, {**posted, field: text}, field, said)
    assert not ToolGroup.objects.filter(name="t-thing").exists()
    assert not RemoteMcpServer.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_mcp_call_of_a_long_name_ending_in_a_nul_is_refused_and_recorded(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
) -> None:
    """Found: ``tools/call`` of ``"a" * 199 + "\\u0000"`` (2025-03-26, raw JSON-RPC) answered "Internal server error"
    and recorded nothing: the name, cut to 200 characters and then escaped, was 205 characters for a 200-character
    column.
    Expect: the bounded "Unknown tool ..." error naming the caller's tool, the call recorded ``invalid`` with its name
    escaped and cut to the column, nothing run, the audit trail intact."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="record_effect", user=alice)
    name = "a" * 199 + "\x00"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {"note": "n"}}}
    headers = {
        "Authorization": f"Bearer {token(alice)}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-03-26",
    }

    answer = httpx.post(f"{live_asgi}/mcp", content=json.dumps(body).encode(), headers=headers, timeout=30)

    assert answer.status_code == 200, answer.text
    (data,) = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    error = json.loads(data)["error"]
    assert error["code"] == -32602, error
    assert error["message"].startswith("Unknown tool 'aaa") and "Available tools: record_effect." in error["message"]
    call = ToolCall.objects.get()
    assert (call.status, call.user_id, call.tool_name) == (CallStatus.INVALID, alice.pk, "a" * 199 + "\\")
    assert not SideEffect.objects.exists()
    assert_audit_intact()
