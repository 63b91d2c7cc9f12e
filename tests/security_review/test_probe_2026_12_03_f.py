"""Adversarial probe (2026-12-03, sixth pass) of credentials, secrets and the four-eyes rule.

Black-box: every test acts as a person would (the REST API with a real token, a session, the admin's pages and
actions, the MCP endpoint of a live ASGI server, runs of scripted agents and of an OpenAI-compatible endpoint
served by the test) and reads what they are shown. Secrets: ``Secret`` presets (an async tool, a tool whose
``output_model`` refuses what the provider answered), ``sensitive`` arguments (refused by the built-in
``ArgumentPolicy`` interceptor, copied into a saga's compensation), model provider keys (an endpoint that
refuses or echoes its key), the OpenAPI schema and anonymous requests. Authentication: deactivated users, a
password change, a user removed from the tenant, tokens outside the ``Authorization`` header, basic auth, a
session without its CSRF token, MCP's header variants and cookies. Four eyes: an operator who started the run,
a superuser requester, admin change/delete doors on the request and the call, approver and fallback groups,
rejected or approved requests decided again, an edit naming another tenant, a tenant rule asking fewer
approvals than the platform's.

Tests named ``test_fixed_*`` are leaks this probe found (written first as strict expected failures asserting
the secure behaviour), fixed the same day; each docstring says what leaked and how it was fixed. The others
passed when written and stay as regression tests.
"""

import base64
import json
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any, Literal

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from mcp import Client as McpClient
from pydantic import BaseModel, ConfigDict
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agents_app.models import AgentRun, ModelProvider, RunStatus
from agents_app.services import agent_create, run_start
from approvals.forms import shown_fields_version
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalRule, ApprovalStatus
from approvals.unanswered import approvals_escalate_due
from demo.models import Order
from tests.helpers import console
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi is a fixture
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub import Param, Secret, ToolContext, ToolError, tool
from toolhub.admin_marks import marks_field, row_mark
from toolhub.api.keys import api_key_issue
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall, ToolGroup
from toolhub.sagas.checks import check_compensations
from toolhub.sagas.models import Saga
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

#: A sensitive argument's value (``sensitive=(...)``): never in the audit trail, the API or the admin (README).
TOKEN = "tok-probe-f-sensitive-93ab"
#: A ``Secret`` preset's value, as long as a real provider key: scrubbed to ``[secret]`` from everything.
KEY_ENV = "PROBE_F_UPSTREAM_KEY"
KEY = "sk-live-PROBEF0head1234abcdefghij-klmnopqrstu5678tail9XYZ"
#: A model provider's API key (environment variable named by the provider row).
LLM_KEY_ENV = "PROBE_F_LLM_KEY"
LLM_KEY = "sk-probe-f-llm-8d1e2f3a4b5c6d7e8f90a1b2"


def export(client: Client, export_format: str) -> str:
    return b"".join(client.post(f"/admin/toolhub/toolcall/export/{export_format}/").streaming_content).decode()


def audit_data(**filters: Any) -> str:
    return json.dumps(list(AuditEvent.objects.filter(**filters).values_list("data", flat=True)))


# --- tools of this probe -------------------------------------------------------------------------------------


@tool(sensitive=("api_token",))
def probe_f_vault(
    account: Annotated[str, Param("The account to read.")], api_token: Annotated[str, Param("The vault token.")]
) -> dict:
    """Read an account from the vault with a token."""
    return {"account": account}


class Receipt(BaseModel):
    """What the payment provider's answer must be."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["charged", "declined"]


@tool(presets={"api_key": Secret(KEY_ENV)}, output_model=Receipt)
def probe_f_charge(amount: Annotated[int, Param("How much to charge.")], api_key: str) -> Any:
    """Charge at the payment provider and hand its answer on."""
    # The provider's answer, passed on as it came: it repeats the request's Authorization header.
    return {"status": "declined", "authorization": f"Bearer {api_key}"}


@tool(presets={"api_key": Secret(KEY_ENV)})
async def probe_f_async_lookup(channel: Annotated[str, Param("How to answer.")], api_key: str) -> Any:
    """Look something up at the provider (an async tool)."""
    logging.getLogger("probe_f").warning("async upstream call with key %s", api_key)
    if channel == "raise":
        raise RuntimeError(f"provider said 401 for {api_key}")
    if channel == "tool_error":
        raise ToolError(f"the provider refused key {api_key}")
    return {"echo": api_key, "nested": [{"key": api_key}]}


@tool(sensitive=("card_token",))
def probe_f_pay(
    order: Annotated[str, Param("The order.")], card_token: Annotated[str, Param("The card's token.")], ctx: ToolContext
) -> dict:
    """Pay an order with a card token."""
    return {"order": order, "paid": True}


@probe_f_pay.compensation(idempotent=True)
def probe_f_refund(order: str, card_token: str) -> dict:
    """Refund an order's payment to the card it was paid with."""
    return {"refunded": order}


@tool(sensitive=("card_token",))
def probe_f_pay_declared(
    order: Annotated[str, Param("The order.")], card_token: Annotated[str, Param("The card's token.")], ctx: ToolContext
) -> dict:
    """Pay an order with a card token (its compensation declares the token sensitive too)."""
    return {"order": order, "paid": True}


@probe_f_pay_declared.compensation(idempotent=True, sensitive=("card_token",))
def probe_f_refund_declared(order: str, card_token: str) -> dict:
    """Refund an order's payment to the card it was paid with."""
    return {"refunded": order}


@tool(risk="high")
def probe_f_transfer(
    tenant: Annotated[str, Param("Whose books.")], amount: Annotated[int, Param("How much.")], ctx: ToolContext
) -> dict:
    """Move money within a tenant's books (an operator approves)."""
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="probe_f_transfer", note=f"{tenant}:{amount}")
    return {"tenant": tenant, "amount": amount}


@pytest.fixture(autouse=True)
def _probe_tools(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(KEY_ENV, KEY)
    with registry.temporarily(
        probe_f_vault,
        probe_f_charge,
        probe_f_async_lookup,
        probe_f_pay,
        probe_f_refund,
        probe_f_pay_declared,
        probe_f_refund_declared,
        probe_f_transfer,
    ):
        yield


@pytest.fixture
def mcp_url(live_asgi: str) -> str:  # noqa: F811 - the fixture imported above
    """The base URL of toolhub's ASGI application (Django and /mcp) served by uvicorn for the test."""
    return live_asgi


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-auditor-f", tenant=tenant, staff=True, groups=(roles["auditors"],))


# --- sensitive arguments ---------------------------------------------------------------------------------------


def test_fixed_an_interceptors_refusal_never_quotes_a_sensitive_value_into_pages_exports_or_the_audit_trail(
    alice: User, acme_operator: User, acme_auditor: User, settings: Any
) -> None:
    """The platform configures the built-in ``ArgumentPolicy``: only vault tokens (``vault-...``) may be sent.

    alice calls ``probe_f_vault`` (``api_token`` is sensitive) over the API and through a scripted run, each
    with another token. Found: the refusal's default message is ``The value '<token>' at $.api_token is not
    allowed ...``; it is stored as the call's error and its ``call.denied`` event, so the token shows on the
    call's admin page, the audit events, the CSV/JSONL exports, the call API and the run's messages (API and
    admin), all of which the README says redact sensitive values. Fixed: an interceptor's refusal (and a failing one's
    detail) is kept with the call's sensitive values replaced (``toolhub.call_arguments``).
    """
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "INTERCEPTORS": [
            {
                "class": "toolhub.interceptors.ArgumentPolicy",
                "options": {"rules": [{"tool": "probe_f_vault", "path": "$.api_token", "allow": ["re:vault-[a-z]+"]}]},
            }
        ],
    }
    arguments = {"account": "a-1", "api_token": TOKEN}
    refused = client_for(alice).post("/api/v1/calls/", {"tool": "probe_f_vault", "arguments": arguments}, format="json")
    assert refused.status_code == 403 and "not allowed" in refused.json()["detail"], refused.content
    agent = agent_create(
        name="probe-f-vault-reader",
        tenant="acme",
        tools=["probe_f_vault"],
        script=[{"tool_calls": [{"name": "probe_f_vault", "arguments": arguments}]}, {"content": "done"}],
    )
    run = run_start(agent=agent, user=alice, input="read a-1")
    calls = list(ToolCall.objects.filter(tool_name="probe_f_vault"))
    assert len(calls) == 2 and {call.status for call in calls} == {CallStatus.DENIED}

    shown = {
        "audit trail": audit_data(tool_name="probe_f_vault"),
        "run API": client_for(alice).get(f"/api/v1/runs/{run.pk}/").content.decode(),
        "run page": console(acme_operator).get(f"/admin/agents_app/agentrun/{run.pk}/change/").content.decode(),
        "csv export": export(console(acme_auditor), "csv"),
        "jsonl export": export(console(acme_auditor), "jsonl"),
    }
    for call in calls:
        shown[f"call API {call.pk}"] = client_for(alice).get(f"/api/v1/calls/{call.pk}/").content.decode()
        shown[f"call page {call.pk}"] = (
            console(acme_auditor).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode()
        )
    assert [where for where, text in shown.items() if TOKEN in text] == []


def test_fixed_a_compensation_never_receives_a_steps_sensitive_argument_unless_it_declares_it_sensitive(
    alice: User, acme_auditor: User
) -> None:
    """alice pays an order in her direct saga ``pay-1`` (``card_token`` is sensitive), then rolls the saga back.

    Found: the compensation ``probe_f_refund`` got its arguments by name from the step (README, Sagas),
    ``card_token`` included, without declaring it sensitive, so the refund's call showed the token in clear on
    the call API, its admin page, the saga's page, the audit trail and the exports. Fixed: such a compensation
    is an error at startup (``toolhub.E103``) and is not planned (an operator sees why, without the value);
    one that declares the parameter sensitive runs, and the token shows nowhere either.
    """
    errors = {message.id: message.msg for message in check_compensations() if message.obj == "probe_f_pay"}
    assert "card_token" in errors.get("toolhub.E103", ""), errors

    api = client_for(alice)
    for saga, tool_name in (("pay-1", "probe_f_pay"), ("pay-2", "probe_f_pay_declared")):
        assert api.post("/api/v1/sagas/", {"saga_id": saga}, format="json").status_code == 201
        paid = api.post(
            "/api/v1/calls/",
            {"tool": tool_name, "arguments": {"order": saga, "card_token": TOKEN}, "saga_id": saga},
            format="json",
        )
        assert paid.status_code == 200 and TOKEN not in paid.content.decode(), paid.content
        assert api.post(f"/api/v1/sagas/{saga}/rollback/").status_code == 202

    assert not ToolCall.objects.filter(tool_name="probe_f_refund").exists()
    undone = Saga.objects.get(key="pay-1").compensations.get()
    assert undone.arguments is None and "card_token" in undone.mapping_error and TOKEN not in undone.mapping_error
    refund = ToolCall.objects.get(tool_name="probe_f_refund_declared")
    assert refund.status == CallStatus.SUCCEEDED and refund.arguments["card_token"] == TOKEN  # it ran with it

    staff = console(acme_auditor)
    shown = {
        "refund call API": api.get(f"/api/v1/calls/{refund.pk}/").content.decode(),
        "audit trail": audit_data(tenant="acme"),
        "csv export": export(staff, "csv"),
        "jsonl export": export(staff, "jsonl"),
        "refund call page": staff.get(f"/admin/toolhub/toolcall/{refund.pk}/change/").content.decode(),
    }
    for saga in Saga.objects.filter(key__in=["pay-1", "pay-2"]):
        shown[f"saga API {saga.key}"] = api.get(f"/api/v1/sagas/{saga.key}/").content.decode()
        shown[f"saga page {saga.key}"] = staff.get(f"/admin/sagas/saga/{saga.pk}/change/").content.decode()
    assert [where for where, text in shown.items() if TOKEN in text] == []


# --- Secret presets ------------------------------------------------------------------------------------------


def test_fixed_an_output_model_error_quotes_nothing_of_a_secret_presets_value(
    alice: User, acme_auditor: User, caplog: pytest.LogCaptureFixture
) -> None:
    """``probe_f_charge`` has a ``Secret`` preset and an ``output_model`` that forbids extra fields; the provider's
    answer it passes on repeats the ``Authorization`` header.

    The scrubber replaces the whole value (and its encodings). Found: toolhub's own validation of the result
    fails, and pydantic's message quotes the input value cut in the middle (``input_value='Bearer sk-live-
    PROBEF0he...klmnopqrstu5678tail9XYZ'``): 40 of the key's 57 characters, which no form of the whole value
    matches. The call's stored ``error_detail``, shown on its admin page to tenant auditors and operators, and the
    log of the process that ran it carried them. Fixed: toolhub's validation of a result raises its error without
    the values (``toolhub.tools.factories.checked_output``): locations and reasons only.
    """
    caplog.set_level(logging.DEBUG)
    answer = client_for(alice).post(
        "/api/v1/calls/", {"tool": "probe_f_charge", "arguments": {"amount": 5}}, format="json"
    )
    call = ToolCall.objects.get(tool_name="probe_f_charge")
    assert call.status == CallStatus.FAILED and "ValidationError" in call.error

    head, tail = KEY[:16], KEY[-12:]
    shown = {
        "API answer": answer.content.decode(),
        "call page": console(acme_auditor).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode(),
        "stored call": json.dumps(list(ToolCall.objects.filter(pk=call.pk).values()), default=str),
        "audit trail": audit_data(call_id=call.pk),
        "log": caplog.text,
    }
    assert [where for where, text in shown.items() if head in text or tail in text] == []


def test_an_async_tools_secret_is_scrubbed_from_its_result_errors_logs_pages_and_mcp_answers(
    mcp_url: str, alice: User, acme_auditor: User, caplog: pytest.LogCaptureFixture
) -> None:
    """An ``async def`` tool with a ``Secret`` preset returns it (nested), raises it, raises a ``ToolError``
    quoting it and logs it; over the REST API and over MCP (``tools/call`` and ``toolhub_call_status``).

    Nothing of it reaches an answer, a stored row, the audit trail, the call page or the log: ``[secret]`` stands
    where it was.
    """
    caplog.set_level(logging.DEBUG)
    api = client_for(alice)
    answers = [
        api.post("/api/v1/calls/", {"tool": "probe_f_async_lookup", "arguments": {"channel": c}}, format="json")
        for c in ("result", "raise", "tool_error")
    ]
    assert [a.json()["status"] for a in answers] == ["succeeded", "failed", "failed"]
    assert answers[0].json()["result"] == {"echo": "[secret]", "nested": [{"key": "[secret]"}]}
    assert answers[2].json()["error"] == "the provider refused key [secret]"

    async def over_mcp(client: McpClient) -> list[Any]:
        result = await client.call_tool("probe_f_async_lookup", {"channel": "result"})
        failed = await client.call_tool("probe_f_async_lookup", {"channel": "tool_error"})
        status = await client.call_tool("toolhub_call_status", {"call_id": result.meta["io.toolhub/call"]["id"]})
        return [result, failed, status]

    mcp_answers = with_client(mcp_url, token(alice), over_mcp)
    assert "[secret]" in str(mcp_answers[0]) and mcp_answers[1].is_error is True

    texts = [a.content.decode() for a in answers] + [str(a) for a in mcp_answers] + [caplog.text]
    for call in ToolCall.objects.filter(tool_name="probe_f_async_lookup"):
        texts.append(console(acme_auditor).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode())
        texts.append(api.get(f"/api/v1/calls/{call.pk}/").content.decode())
    texts.append(json.dumps(list(ToolCall.objects.values()), default=str))
    texts.append(audit_data())
    assert ToolCall.objects.filter(tool_name="probe_f_async_lookup").count() == 5
    assert [text[:80] for text in texts if KEY in text or KEY[:16] in text] == []
    assert "async upstream call with key [secret]" in caplog.text


# --- model provider keys -------------------------------------------------------------------------------------


class _ModelEndpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses its key (``refuse``) or repeats the header it got (``echo``)."""

    mode = "echo"

    def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        seen = self.headers.get("authorization", "")
        if self.mode == "refuse":
            self._answer(401, {"error": {"message": f"Incorrect API key provided: {seen}", "type": "auth"}})
            return
        first = not any(m.get("role") == "assistant" for m in body.get("messages", []))
        message: dict[str, Any] = {"role": "assistant", "content": f"(debug) your request carried {seen}"}
        if first:
            arguments = json.dumps({"note": f"forwarding {seen}"})
            message["tool_calls"] = [
                {"id": "c-1", "type": "function", "function": {"name": "record_effect", "arguments": arguments}}
            ]
        completion = {
            "id": "cmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "probe",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if first else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        self._answer(200, completion)

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """``use(mode)``: an acme agent on an OpenAI-compatible provider served here; returns the agent's name."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ModelEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(LLM_KEY_ENV, LLM_KEY)

    def use(mode: str) -> str:
        monkeypatch.setattr(_ModelEndpoint, "mode", mode)
        ModelProvider.objects.create(
            name=f"probe-f-{mode}",
            kind="openai",
            base_url=f"http://127.0.0.1:{server.server_port}/v1",
            model_name="probe",
            credential_env=LLM_KEY_ENV,
            request_timeout_seconds=10,
            deadline_seconds=20,
        )
        agent_create(name=f"probe-f-{mode}-agent", tenant="acme", provider=f"probe-f-{mode}", tools=["record_effect"])
        return f"probe-f-{mode}-agent"

    try:
        yield use
    finally:
        server.shutdown()
        thread.join(10)


def _runs_shown(alice: User, staff: User) -> dict[str, str]:
    """alice's runs and calls through the API, the runs' admin pages, the audit trail and the tools' effects."""
    api = client_for(alice)
    shown = {"calls API": api.get("/api/v1/calls/").content.decode()}
    for run_id in AgentRun.objects.values_list("id", flat=True):
        shown[f"run API {run_id}"] = api.get(f"/api/v1/runs/{run_id}/").content.decode()
        shown[f"run page {run_id}"] = (
            console(staff).get(f"/admin/agents_app/agentrun/{run_id}/change/").content.decode()
        )
    assert len(shown) > 1
    shown["audit trail"] = audit_data()
    shown["side effects"] = json.dumps(list(SideEffect.objects.values_list("note", flat=True)))
    return shown


def test_a_model_endpoint_refusing_its_key_fails_the_run_without_quoting_the_key(
    model_endpoint: Callable[[str], str], alice: User, acme_auditor: User
) -> None:
    """The endpoint answers 401 with a body quoting the key it was sent (as OpenAI's does, masked or not).

    alice's run fails with "Model endpoint answered HTTP 401": neither the key nor its variable is on the run
    (API, admin) or in the audit trail.
    """
    name = model_endpoint("refuse")
    started = client_for(alice).post("/api/v1/runs/", {"agent": name, "input": "hello"}, format="json")
    assert started.status_code == 201, started.content
    assert started.json()["status"] == RunStatus.FAILED and "HTTP 401" in started.json()["error"], started.content

    shown = _runs_shown(alice, acme_auditor)
    assert [where for where, text in shown.items() if LLM_KEY in text or LLM_KEY_ENV in text] == []


def test_fixed_a_model_endpoint_echoing_its_key_has_it_scrubbed_before_the_run_or_a_tool_sees_it(
    model_endpoint: Callable[[str], str], alice: User, acme_auditor: User
) -> None:
    """The endpoint (a debugging proxy, a misconfigured gateway) repeats the ``Authorization`` header it got, in
    its text and in a tool call's arguments.

    README: "Model API keys are never stored"; a remote MCP server that echoes its credential gets ``[secret]``
    stored. Found: the provider's key is stored in the run's messages and output, which alice (a plain member)
    reads over the API, and a worker runs ``record_effect`` with it as an argument (stored on the call, in the
    audit trail and in the tool's own effect): a tool that sends its argument anywhere sends the key there.
    Fixed: the OpenAI-compatible adapter replaces the key by ``[secret]`` in every answer (text, streamed text,
    tool calls), as remote MCP answers are.
    """
    name = model_endpoint("echo")
    started = client_for(alice).post("/api/v1/runs/", {"agent": name, "input": "hello"}, format="json")
    assert started.status_code == 201 and started.json()["status"] == RunStatus.COMPLETED, started.content
    assert ToolCall.objects.filter(tool_name="record_effect", status=CallStatus.SUCCEEDED).count() == 1

    shown = _runs_shown(alice, acme_auditor)
    assert [where for where, text in shown.items() if LLM_KEY in text] == []


def test_the_schema_and_anonymous_requests_show_no_provider_credential_or_row(
    model_endpoint: Callable[[str], str], alice: User
) -> None:
    """Without credentials only the OpenAPI schema and its docs answer; the schema names no provider, endpoint,
    key variable or key, and every API list, the admin and the artifact download refuse."""
    model_endpoint("refuse")
    client_for(alice).post("/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "n"}}, format="json")
    call = ToolCall.objects.get(tool_name="record_effect")
    anonymous = APIClient()

    schema = anonymous.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200 and anonymous.get("/api/docs/").status_code == 200
    text = schema.content.decode()
    assert all(word not in text for word in (LLM_KEY, LLM_KEY_ENV, "127.0.0.1", "probe-f-refuse", KEY_ENV))
    for url in (
        "/api/v1/calls/",
        f"/api/v1/calls/{call.pk}/",
        f"/api/v1/calls/{call.pk}/artifacts/1/",
        "/api/v1/runs/",
        "/api/v1/approvals/",
        "/api/v1/agents/",
        "/api/v1/tools/",
        "/api/v1/tools/export/openai/",
        "/api/v1/sagas/",
    ):
        answer = anonymous.get(url)
        assert answer.status_code in (401, 403), (url, answer.status_code)
        assert "record_effect" not in answer.content.decode(), url
    made = anonymous.post("/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "x"}}, format="json")
    assert made.status_code in (401, 403) and ToolCall.objects.count() == 1
    admin = Client().get("/admin/toolhub/toolcall/")
    assert admin.status_code == 302 and "/admin/login/" in admin["Location"]


# --- authentication -------------------------------------------------------------------------------------------


def _reads_calls(headers: dict[str, str] | None = None, client: Any = None, url: str = "/api/v1/calls/") -> int:
    return (client or APIClient()).get(url, **(headers or {})).status_code


def test_rest_tokens_work_only_in_the_authorization_header_and_no_password_does(alice: User) -> None:
    """alice's token is accepted as ``Authorization: Token <key>`` only: not in the query string (five usual names),
    not as ``Bearer`` on REST, not in a cookie; her username and password as basic auth are refused too."""
    key = api_key_issue(alice)
    assert _reads_calls({"HTTP_AUTHORIZATION": f"Token {key}"}) == 200

    for name in ("token", "auth_token", "key", "access_token", "api_key"):
        assert _reads_calls(url=f"/api/v1/calls/?{name}={key}") in (401, 403), name
    basic = base64.b64encode(b"alice:alice-password").decode()
    assert _reads_calls({"HTTP_AUTHORIZATION": f"Basic {basic}"}) in (401, 403)
    assert _reads_calls({"HTTP_AUTHORIZATION": f"Bearer {key}"}) in (401, 403)
    assert _reads_calls({"HTTP_AUTHORIZATION": f"Token {key}x"}) in (401, 403)
    assert _reads_calls({"HTTP_COOKIE": f"token={key}; auth_token={key}"}) in (401, 403)


def test_a_deactivated_user_loses_token_and_session_and_a_password_change_ends_sessions(alice: User) -> None:
    """alice logs in (session) and holds a token. Her password changes: the session ends. She is deactivated:
    her token and a fresh login are refused."""
    key = api_key_issue(alice)
    User.objects.filter(pk=alice.pk).update(is_staff=True)  # a console session is staff's only
    alice.refresh_from_db()
    session = Client()
    assert session.login(username="alice", password="alice-password")
    assert _reads_calls(client=session) == 200

    alice.set_password("another-password-42")
    alice.save()
    assert _reads_calls(client=session) in (401, 403)
    assert session.get("/admin/").status_code == 302

    alice.is_active = False
    alice.save()
    assert _reads_calls({"HTTP_AUTHORIZATION": f"Token {key}"}) in (401, 403)
    assert not Client().login(username="alice", password="another-password-42")


def test_mcp_takes_an_active_users_token_from_the_authorization_header_only(mcp_url: str, alice: User) -> None:
    """MCP answers ``Bearer``/``Token`` (any case) with alice's key; it refuses basic auth, the key in the query
    string, in ``X-Api-Key`` or a cookie, a logged-in session cookie, extra text after the key, a deleted token
    and a deactivated user's token (401 each)."""
    key = token(alice)
    session = Client()
    assert session.login(username="alice", password="alice-password")
    session_cookie = f"sessionid={session.cookies['sessionid'].value}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    base = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}

    def status(headers: dict[str, str], query: str = "") -> int:
        return httpx.post(f"{mcp_url}/mcp{query}", json=body, headers={**base, **headers}, timeout=20).status_code

    assert status({"Authorization": f"Bearer {key}"}) == 200
    assert status({"Authorization": f"bearer {key}"}) == 200
    basic = base64.b64encode(b"alice:alice-password").decode()
    refused = {
        "basic": status({"Authorization": f"Basic {basic}"}),
        "query token": status({}, f"?token={key}"),
        "query access_token": status({}, f"?access_token={key}"),
        "x-api-key": status({"X-Api-Key": key}),
        "cookie": status({"Cookie": f"token={key}"}),
        "session cookie": status({"Cookie": session_cookie}),
        "extra text": status({"Authorization": f"Bearer {key} {key}"}),
    }
    alice.is_active = False
    alice.save()
    refused["deactivated"] = status({"Authorization": f"Bearer {key}"})
    alice.is_active = True
    alice.save()
    Token.objects.filter(user=alice).delete()
    refused["deleted token"] = status({"Authorization": f"Bearer {key}"})
    assert refused == dict.fromkeys(refused, 401)


def test_a_user_removed_from_the_tenant_keeps_nothing_of_it_through_a_token(
    alice: User, acme_operator: User, mcp_url: str
) -> None:
    """alice makes a call and one that waits for approval, then leaves acme; acme's operator leaves acme too.

    With their tokens (REST and MCP) alice reads neither call, and the operator can no longer decide the request
    (404, as for a missing one).
    """
    alice_key, operator_key = token(alice), token(acme_operator)
    alice_api = APIClient(HTTP_AUTHORIZATION=f"Token {alice_key}")
    done = alice_api.post("/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "n"}}, format="json")
    held = alice_api.post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "r"}}, format="json")
    assert (done.status_code, held.status_code) == (200, 202)
    TenantMembership.objects.filter(user__in=[alice, acme_operator]).delete()

    assert alice_api.get("/api/v1/calls/").json()["results"] == []
    assert alice_api.get(f"/api/v1/calls/{done.json()['id']}/").status_code == 404
    assert alice_api.get(f"/api/v1/approvals/{held.json()['approval_id']}/").status_code == 404
    status = with_client(
        mcp_url,
        alice_key,
        lambda client: client.call_tool("toolhub_call_status", {"call_id": done.json()["id"]}),
    )
    assert status.is_error is True and "record_effect" not in str(status)
    operator_api = APIClient(HTTP_AUTHORIZATION=f"Token {operator_key}")
    decided = operator_api.post(f"/api/v1/approvals/{held.json()['approval_id']}/approve/", {"round": 1}, format="json")
    assert decided.status_code == 404
    assert ApprovalRequest.objects.get(pk=held.json()["approval_id"]).status == ApprovalStatus.PENDING


def test_a_logged_in_operator_cannot_be_made_to_decide_without_the_csrf_token(alice: User, acme_operator: User) -> None:
    """A page elsewhere posts to the approve endpoints with the operator's session cookie (no CSRF token):
    the API and the admin's decide view refuse (403) and nothing is decided."""
    held = client_for(alice).post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "r"}}, format="json")
    request_id = held.json()["approval_id"]
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(acme_operator)

    api = forged.post(f"/api/v1/approvals/{request_id}/approve/", {"round": 1}, content_type="application/json")
    page = forged.post(f"/admin/approvals/approvalrequest/{request_id}/approve/", {"comment": "x", "round": "1"})
    bulk = forged.post(
        "/admin/approvals/approvalrequest/", {"action": "approve_selected", "_selected_action": [str(request_id)]}
    )

    assert (api.status_code, page.status_code, bulk.status_code) == (403, 403, 403)
    assert ApprovalRequest.objects.get(pk=request_id).status == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.exists()


# --- four eyes ----------------------------------------------------------------------------------------------


def _page_decide(client: Client, request: ApprovalRequest, decision: str = "approve", **extra: str) -> Any:
    request.refresh_from_db()
    form = {"comment": "page", "round": str(request.round), "arguments_hash": request.arguments_hash, **extra}
    return client.post(f"/admin/approvals/approvalrequest/{request.pk}/{decision}/", form)


def _bulk_decide(client: Client, request: ApprovalRequest, decision: str = "approve") -> Any:
    request.refresh_from_db()
    form = {
        "action": f"{decision}_selected",
        "_selected_action": [str(request.pk)],
        "apply": "1",
        "comment": "bulk",
        **marks_field([row_mark(request.pk, request.arguments_hash, shown_fields_version(request.tool_name))]),
    }
    return client.post("/admin/approvals/approvalrequest/?status=all", form)


def _api_decide(user: User, request: ApprovalRequest, decision: str = "approve", **body: Any) -> int:
    request.refresh_from_db()
    body = {"round": request.round, **body} if decision == "approve" else body
    return client_for(user).post(f"/api/v1/approvals/{request.pk}/{decision}/", body, format="json").status_code


def _every_door(user: User, request: ApprovalRequest) -> list[int]:
    """The requester tries each way to decide: API approve, approve with an edit, reject; page and bulk, both."""
    answers = [
        _api_decide(user, request),
        _api_decide(user, request, arguments={"note": "edited by the requester"}),
        _api_decide(user, request, "reject"),
    ]
    page = console(user)
    for decision in ("approve", "reject"):
        _page_decide(page, request, decision)
        _bulk_decide(page, request, decision)
    _page_decide(page, request, arguments='{"note": "edited on the page"}')
    return answers


ORDER_SCRIPT = [
    {"tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"content": "Order placed."},
]


def test_an_operator_who_started_the_run_cannot_decide_the_call_its_agent_asked_for(
    tenant: Tenant, roles: dict[str, Group], acme_operator: User
) -> None:
    """An operator starts a run of a scripted agent that orders for 5000 (held: above 1000). The model asked
    for the call, but the run is theirs: API, page and bulk approve/reject/edit are all refused. A second
    operator approves and exactly one order is created, with the model's arguments."""
    starter = make_user("op-starter", tenant=tenant, staff=True, groups=(roles["operators"],))
    agent_create(name="probe-f-orders", tenant="acme", tools=["create_order"], script=ORDER_SCRIPT)
    started = client_for(starter).post("/api/v1/runs/", {"agent": "probe-f-orders", "input": "buy"}, format="json")
    assert started.status_code == 201 and started.json()["status"] == RunStatus.WAITING, started.content
    request = ApprovalRequest.objects.get()
    assert request.requested_by == starter

    assert _every_door(starter, request) == [403, 403, 403]
    request.refresh_from_db()
    assert (request.status, request.round, ApprovalDecision.objects.count()) == (ApprovalStatus.PENDING, 1, 0)

    assert _api_decide(acme_operator, request) == 200
    assert client_for(starter).get(f"/api/v1/runs/{started.json()['id']}/").json()["status"] == RunStatus.COMPLETED
    assert list(Order.objects.values_list("product", "amount", "created_by")) == [("Laptop", 5000, "op-starter")]


def test_a_superuser_requester_cannot_decide_or_unlock_their_call_through_any_admin_door(
    superuser: User, tenant: Tenant, acme_operator: User
) -> None:
    """A superuser (member of acme) asks for a high-risk call, then tries every decision door, and the admin's
    other doors: the request's change form (naming another requester, a status), its delete page, the
    ``delete_selected`` action, the call's change form. Nothing moves; acme's operator then approves it."""
    TenantMembership.objects.create(user=superuser, tenant=tenant)
    held = client_for(superuser).post(
        "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "wire 10"}}, format="json"
    )
    assert held.status_code == 202, held.content
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])

    assert _every_door(superuser, request) == [403, 403, 403]
    page = console(superuser)
    changed = page.post(
        f"/admin/approvals/approvalrequest/{request.pk}/change/",
        {"requested_by": acme_operator.pk, "status": "approved", "required_approvals": "0"},
    )
    deleted = page.post(f"/admin/approvals/approvalrequest/{request.pk}/delete/", {"post": "yes"})
    page.post(
        "/admin/approvals/approvalrequest/?status=all",
        {"action": "delete_selected", "_selected_action": [str(request.pk)], "post": "yes"},
    )
    call_changed = page.post(f"/admin/toolhub/toolcall/{request.call_id}/change/", {"status": "queued"})
    assert (changed.status_code, deleted.status_code, call_changed.status_code) == (403, 403, 403)

    request.refresh_from_db()
    assert (request.status, request.requested_by, request.required_approvals) == (ApprovalStatus.PENDING, superuser, 1)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL
    assert not ApprovalDecision.objects.exists() and not SideEffect.objects.exists()
    assert _api_decide(acme_operator, request) == 200
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["wire 10"]


def test_approver_and_fallback_groups_never_let_the_requester_or_an_outsider_decide(
    tenant: Tenant, roles: dict[str, Group]
) -> None:
    """``risky_effect``'s tool group lets only ``treasury`` decide, and ``duty`` after escalation. The requester is
    an operator added to both groups. Before escalation: the requester, an operator in neither group and a duty
    operator are refused. After escalation (the periodic task): the requester and the outsider still are; the
    duty operator's approval releases the call."""
    treasury, duty = Group.objects.create(name="probe-f-treasury"), Group.objects.create(name="probe-f-duty")
    operators = roles["operators"]
    requester = make_user("op-requester", tenant=tenant, staff=True, groups=(operators, treasury, duty))
    outsider = make_user("op-outsider", tenant=tenant, staff=True, groups=(operators,))
    on_duty = make_user("op-duty", tenant=tenant, staff=True, groups=(operators, duty))
    ToolGroup.objects.create(
        name="probe-f-effects",
        extra_tools=["risky_effect"],
        approver_group=treasury,
        escalation_group=duty,
        escalate_after_seconds=3600,
    )
    held = client_for(requester).post(
        "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "wire 7"}}, format="json"
    )
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])
    assert request.approver_group == treasury and request.escalation_group == duty

    assert _every_door(requester, request) == [403, 403, 403]
    assert [_api_decide(user, request) for user in (outsider, on_duty)] == [403, 403]
    ApprovalRequest.objects.filter(pk=request.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))
    assert approvals_escalate_due() == 1

    assert _every_door(requester, request) == [403, 403, 403]
    assert _api_decide(outsider, request) == 403
    assert not ApprovalDecision.objects.exists()
    assert _api_decide(on_duty, request) == 200
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["wire 7"]


def test_a_decided_request_is_never_decided_again_or_edited_into_another_version(
    alice: User, acme_operator: User, tenant: Tenant, roles: dict[str, Group]
) -> None:
    """A request rejected by one operator is approved by another (API, page, bulk): refused, nothing runs.
    A request approved (and run) is then edited or rejected (API, page): refused, and what ran is the approved
    version, once."""
    other = make_user("op-other", tenant=tenant, staff=True, groups=(roles["operators"],))

    def hold(note: str) -> ApprovalRequest:
        held = client_for(alice).post(
            "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": note}}, format="json"
        )
        return ApprovalRequest.objects.get(pk=held.json()["approval_id"])

    rejected = hold("reject me")
    assert _api_decide(acme_operator, rejected, "reject", comment="no") == 200
    assert _api_decide(other, rejected) == 409
    _page_decide(console(other), rejected)
    _bulk_decide(console(other), rejected)
    assert _api_decide(acme_operator, rejected) == 409
    rejected.refresh_from_db()
    assert rejected.status == ApprovalStatus.REJECTED
    assert ToolCall.objects.get(pk=rejected.call_id).status == CallStatus.REJECTED

    approved = hold("wire 10")
    assert _api_decide(acme_operator, approved) == 200
    assert _api_decide(other, approved, arguments={"note": "wire 99999"}) == 409
    assert _api_decide(acme_operator, approved, arguments={"note": "wire 99999"}) == 409
    assert _api_decide(other, approved, "reject") == 409
    _page_decide(console(other), approved, arguments='{"note": "wire 99999"}')
    _page_decide(console(other), approved, "reject")
    approved.refresh_from_db()
    assert (approved.status, approved.round) == (ApprovalStatus.APPROVED, 1)
    call = ToolCall.objects.get(pk=approved.call_id)
    assert (call.status, call.arguments, call.attempts) == (CallStatus.SUCCEEDED, {"note": "wire 10"}, 1)
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["wire 10"]


def test_an_operators_edit_naming_another_tenant_is_never_executed(
    alice: User, acme_operator: User, other_tenant: Tenant
) -> None:
    """alice's high-risk transfer names her tenant (as it must). acme's operator edits ``tenant`` to globex and
    approves: the edit either is refused or the call is denied when it runs; nothing moves in globex's books."""
    held = client_for(alice).post(
        "/api/v1/calls/", {"tool": "probe_f_transfer", "arguments": {"tenant": "acme", "amount": 5}}, format="json"
    )
    assert held.status_code == 202, held.content
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])

    _api_decide(acme_operator, request, arguments={"tenant": "globex"})
    _page_decide(console(acme_operator), request, arguments='{"tenant": "globex"}')

    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status != CallStatus.SUCCEEDED
    assert not SideEffect.objects.filter(tool="probe_f_transfer").exists()


def test_a_tenant_rule_cannot_ask_fewer_approvals_than_the_platforms_rule(
    alice: User, tenant: Tenant, roles: dict[str, Group], acme_operator: User
) -> None:
    """The platform asks two approvals of ``risky_effect``. acme's developer adds, in the admin, an acme rule
    evaluated first that asks one (and one asking none). The call still needs two distinct operators."""
    developer = make_user("acme-developer-f", tenant=tenant, staff=True, groups=(roles["developers"],))
    second = make_user("op-second", tenant=tenant, staff=True, groups=(roles["operators"],))
    ApprovalRule.objects.create(name="platform-two", tool_name="risky_effect", required_approvals=2, priority=50)
    page = console(developer)
    for name, required in (("acme-one", "1"), ("acme-none", "0")):
        added = page.post(
            "/admin/approvals/approvalrule/add/",
            {
                "name": name,
                "enabled": "on",
                "priority": "1",
                "tool_name": "risky_effect",
                "tenant": tenant.pk,
                "required_approvals": required,
            },
        )
        assert added.status_code == 302, added.content.decode()[:2000]
    assert ApprovalRule.objects.filter(tenant=tenant).count() == 2

    held = client_for(alice).post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "x"}}, format="json")
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])
    assert request.required_approvals == 2 and request.rule.tenant == tenant
    assert _api_decide(acme_operator, request) == 200
    assert _api_decide(acme_operator, request) == 403
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and not SideEffect.objects.exists()
    assert _api_decide(second, request) == 200
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["x"]
