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

- The agent loop against the local OpenAI-compatible fake: one turn of nine hostile calls (all but one reusing the
  id ``c1``) is recorded call by call, each refusal bounded and read by the model, the valid ones run once, the ids
  made unique and at most 100 characters (``model_answers._call_ids``)
  (``test_holding_a_hostile_model_turn_makes_bounded_refusals_and_runs_the_valid_calls_once``). Probed besides: a
  tool call whose name or arguments is not text (an integer, an object) or whose id is ``null`` fails the turn as the
  endpoint's ("not a chat completion", retryable) or gets a derived id; 500 calls in one turn stop the run at the
  agent's ``max_tool_calls`` with nothing run; ``-0`` is read as ``0.0``; a key given twice is read as its last value
  (as the REST API reads it, review f); a 400-digit integer for a float parameter is refused by the schema.
- The MCP server (raw JSON-RPC, both protocol versions): a tool name that is not text, ``null``, a list, 300,000
  characters, a short name with a NUL (escaped, "Unknown tool ..."), arguments not an object (``-32602``),
  ``Infinity``, a key of 100,000 characters; under 2026-07-28 a name that does not match ``Mcp-Name`` is refused
  (``-32020``) before toolhub, so no NUL or lone surrogate reaches the pipeline as a name there; under 2025-03-26 the
  SDK's parser refuses a lone surrogate anywhere (``-32700``); ``toolhub_call_status`` with hostile arguments answers
  its usage line (review dg holds the rest).
- Subagents: a subagent tool's arguments go through its input model (the pipeline's one validation) and its child's
  task is the arguments' redacted JSON text; the model sets no tenant, user or budget (``SubagentLimits`` is code).
- The admin's other edit fields, as globex's developer on the tenant's agent, rule and grant and the tool
  definitions' page, and as a superuser on every add page: invalid UTF-8 (decoded with replacement characters, as
  Django does), ``1e309``, ``-0``, ``2**70`` and 5,000 digits in number fields (refused by the fields' ranges),
  200,000 characters (refused by the fields' lengths), a NUL in any posted field (400 before any view,
  ``StorableAddressMiddleware``): no 500, nothing saved that the form refused. A lone surrogate cannot be sent in a
  form (it is not UTF-8).
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
from tests.security_review.test_review_2026_12_05_bp import _agent, _started
from tests.security_review.test_review_2026_12_05_cg import _FormAsPosted
from tests.testapp.models import SideEffect
from tests.unit.fake_openai import FakeModel, Reply
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.models import CallStatus, Grant, Tenant, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

_SUM = '{"a": 1, "op": "+", "b": 2}'

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


#: One hostile turn of the fake OpenAI-compatible endpoint: (id, name, arguments) -> the call's status and what the
#: model reads of it (in part).
HOSTILE_TURN = [
    ("c1", "a" * 199 + "\x00", _SUM, "invalid", "Unknown tool 'aaa"),
    ("c1", "calculate", '{"a": 1e309, "op": "+", "b": 2}', "invalid", "a is not a finite number"),
    ("c1", "calculate", '{"a": ' + "9" * 5000 + ', "op": "+", "b": 2}', "invalid", "more than 4300 digits"),
    ("c1", "calculate", '{"a\\u0000": 1, "op": "+", "b": 2}', "invalid", "a key contains a NUL character"),
    ("c1", "calculate", '{"a": 1, "op": "+\\ud800", "b": 2}', "invalid", "op contains an invalid character"),
    ("c1", "calculate", '{"a": ' + "[" * 3000 + "]" * 3000 + "}", "invalid", "nested deeper than"),
    ("c1", "calculate", '{"a": 1, "op": "+", "b": 2, "zz": 3}', "invalid", "zz: Extra inputs are not permitted"),
    ("c1", "calculate", '{"a": 1, "op": "+", "b": 2, "b": 3}', "succeeded", "4.0"),
    ("c" * 99 + "\x00", "calculate", '{"a": -0, "op": "+", "b": 2}', "succeeded", "2.0"),
]


def _completion(message: dict[str, Any], finish: str) -> Reply:
    body = {
        "id": "chatcmpl-t",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    return Reply(200, json.dumps(body).encode())


def test_holding_a_hostile_model_turn_makes_bounded_refusals_and_runs_the_valid_calls_once(
    fake_model: FakeModel, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Checked (holding): one turn of the OpenAI-compatible endpoint with nine calls, all but the first reusing the
    id ``c1``: a name of 199 characters and a NUL, ``1e309``, a 5,000-digit integer, a NUL in a key, a lone surrogate,
    3,000 levels of nesting, an unknown field, a duplicated key, an id of 99 characters and a NUL with ``-0``.
    Expect: each refused call ``invalid`` with a bounded message the model reads (nothing run), the duplicated key's
    last value used, every id unique and at most 100 characters, each valid call run once, the run answered and its
    audit trail intact."""
    calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments, _, _ in HOSTILE_TURN
    ]
    fake_model.queue(_completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"))
    fake_model.queue(_completion({"role": "assistant", "content": "done"}, "stop"))

    run = _started(_agent(fake_model), alice, django_capture_on_commit_callbacks)

    assert (run.status, run.output) == ("completed", "done"), run.error
    rows = list(ToolCall.objects.filter(run_id=run.id).order_by("position"))
    results = [message for message in run.messages if message["role"] == "tool"]
    assert len(rows) == len(results) == len(HOSTILE_TURN)
    for row, result, (_, _, _, status, said) in zip(rows, results, HOSTILE_TURN, strict=True):
        assert row.status == status and said in result["content"], (row.tool_name[:20], row.status, result)
        assert len(result["content"]) < 500 and result["tool_call_id"] == row.model_call_id
    ids = [row.model_call_id for row in rows]
    assert len(set(ids)) == len(ids) and all(len(call_id) <= 100 and "\x00" not in call_id for call_id in ids)
    assert len(rows[0].tool_name) == 200
    assert_audit_intact()
