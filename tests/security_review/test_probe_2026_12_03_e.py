"""Adversarial probe (2026-12-03, fifth pass): stored XSS in the console, outbound URLs, notifications, agentic state.

Black-box: every test acts as a person would (admin pages, the REST API, runs of scripted agents) and reads what
they are shown. Text the model, a client or tenant staff control is planted where the console shows it (tool
arguments and raw arguments, results, errors, progress, artifact names, agent descriptions, approval comments
and edits, run messages, saga notes, audit data, remote MCP definitions, webhook errors) and every console page
and browsable API page is read for a live tag or attribute. Then: which URLs workers call that tenant staff can
set, who an approval request of acme writes to, and whether a member's run reaches a colleague's run state.

Open leaks are strict xfails named ``test_leak_*``; everything else passes when the boundary holds.
"""

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core import mail
from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from agents_app.blackboard import blackboard_entries, blackboard_put
from agents_app.models import AgentRun, BlackboardEntry
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, ApprovalRule, WebhookDelivery
from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, make_user
from toolhub import Param, tool
from toolhub.audit import audit_append
from toolhub.mcp_client.definitions import definition_hash, local_name
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool, RemoteToolStatus
from toolhub.models import CallStatus, Tenant, ToolCall, ToolCallArtifact
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS_URL = "javascript:alert(1)"
PAYLOAD = f"{SCRIPT}{IMG} {JS_URL}"
LIVE = (SCRIPT, "<img src=x onerror=alert(1)>")
LIVE_URL = re.compile(r"""(?:href|src|action|formaction)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"

SECRET = "sk-probe-e-never-mailed-51c2"


@tool(sensitive=("api_token",), risk="high")
def probe_e_note(
    note: Annotated[str, Param("A note to file.")],
    api_token: Annotated[str, Param("The CRM token.")],
) -> dict:
    """File a note in the CRM."""
    return {"filed": note}


@pytest.fixture(autouse=True)
def _probe_tools() -> Iterator[None]:
    with registry.temporarily(probe_e_note):
        yield


def live_markup(html: str) -> list[str]:
    """The payload's pieces that the page carries as live markup (a tag or an attribute), not as text."""
    found = [piece for piece in LIVE if piece in html]
    found += LIVE_URL.findall(html)
    return found


def test_the_detector_flags_live_markup_and_passes_escaped_text() -> None:
    """The check every XSS probe below relies on: the payload as markup is flagged, escaped it is not."""
    from django.utils.html import escape

    assert len(live_markup(f'<p>{PAYLOAD}</p><a href="{JS_URL}">x</a>')) == 3
    assert live_markup(f"<p>{escape(PAYLOAD)}</p><a href='/x'>{escape(JS_URL)}</a>") == []


@pytest.fixture
def acme_developer(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],))


@pytest.fixture
def second_acme_operator(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-2", tenant=tenant, staff=True, groups=(roles["operators"],))


# --- 1. stored XSS ---------------------------------------------------------------------------------------------


@pytest.fixture
def poisoned(acme: AcmeData, alice: User, acme_operator: User, superuser: User) -> dict[str, Any]:
    """acme's data with the payload planted wherever the model, a client or tenant staff put text.

    Through the product: an approval rule a developer named (it becomes the request's reason), an agent whose
    description and system prompt a developer wrote, a run whose user input, context, model message, tool
    arguments and a tool name the model made up carry it, the call held for approval, an operator's edit of it
    (a diff) with a comment, a run message and progress note, a blackboard entry and an audit event. Then,
    as a tool, a remote server or a webhook receiver would write them: a call's raw arguments, result, error
    and progress, an artifact's name, a compensation's errors and note, a remote tool's offered definition,
    a webhook delivery's error.
    """
    from agents_app.tools import _add_update
    from approvals.services import approval_approve

    ApprovalRule.objects.create(name=PAYLOAD, tenant=Tenant.objects.get(slug="acme"), tool_name="probe_e_note")
    agent = agent_create(
        name="probe-e-xss",
        tenant="acme",
        description=PAYLOAD,
        system_prompt=PAYLOAD,
        tools=["probe_e_note"],
        script=[
            {
                "content": PAYLOAD,
                "tool_calls": [
                    {"name": "probe_e_note", "arguments": {"note": PAYLOAD, "api_token": SECRET}},
                    {"name": PAYLOAD, "arguments": {PAYLOAD: PAYLOAD}},
                ],
            },
            {"content": PAYLOAD},
        ],
    )
    run = run_start(agent=agent, user=alice, input=PAYLOAD, context={"note": PAYLOAD})
    run.refresh_from_db()
    request = ApprovalRequest.objects.get(call__run_id=run.id)
    assert SCRIPT in request.reason, request.reason
    assert ToolCall.objects.filter(run_id=run.id, tool_name=PAYLOAD).exists()
    client_for(alice).post("/api/v1/calls/", {"tool": PAYLOAD, "arguments": {"x": PAYLOAD}}, format="json")
    approval_approve(
        request_id=request.pk,
        user=acme_operator,
        comment=PAYLOAD,
        arguments={"note": PAYLOAD + " edited", "api_token": SECRET},
        expected_round=request.round,
        expected_arguments_hash=request.arguments_hash,
    )
    _add_update(run, {"kind": "message", "text": PAYLOAD, "at": "2026-12-03T00:00:00+00:00"})
    _add_update(run, {"kind": "progress", "text": PAYLOAD, "at": "2026-12-03T00:00:01+00:00"})
    blackboard_put(run, "probe-e-entry", {"value": PAYLOAD}, kind="Note")

    ToolCall.objects.filter(pk=acme.external_call.pk).update(
        raw_arguments=PAYLOAD,
        error=PAYLOAD,
        error_detail=PAYLOAD,
        result={"answer": PAYLOAD, "link": JS_URL},
        progress=[{"message": PAYLOAD, "at": "2026-12-03T00:00:00+00:00"}],
    )
    ToolCallArtifact.objects.filter(pk=acme.artifact.pk).update(name=PAYLOAD)
    type(acme.compensation).objects.filter(pk=acme.compensation.pk).update(
        last_error=PAYLOAD, mapping_error=PAYLOAD, resolution_note=PAYLOAD
    )
    with transaction.atomic():
        audit_append(
            event_type="probe.xss",
            actor=PAYLOAD,
            data={"note": PAYLOAD, "url": JS_URL},
            call_id=acme.external_call.pk,
            tool_name="crm_lookup",
            tenant="acme",
        )
    WebhookDelivery.objects.create(
        event="run.message",
        payload={"tenant": "acme", "run": str(run.id), "message": PAYLOAD},
        last_error=PAYLOAD,
        next_attempt_at="2026-12-03T00:00:00Z",
    )
    server = RemoteMcpServer.objects.create(name="probeecrm", url="https://tools.example.com/mcp", description=PAYLOAD)
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="PROBE_E_TOKEN")
    accepted = {
        "name": "lookup",
        "description": PAYLOAD,
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "description": PAYLOAD}}},
    }
    RemoteMcpServer.objects.create(name="probeejs", url=JS_URL, description=JS_URL)
    offered = {**accepted, "description": PAYLOAD + " (changed)"}
    RemoteMcpTool.objects.create(
        server=server,
        remote_name="lookup",
        tool_name=local_name("probeecrm", "lookup"),
        status=RemoteToolStatus.ACTIVE,
        accepted_definition=accepted,
        accepted_hash=definition_hash(accepted),
        current_definition=offered,
        current_hash=definition_hash(offered),
    )
    return {"run": run, "request": request, "agent": agent, "server": server}


def _admin_urls(poisoned: dict[str, Any]) -> list[str]:
    """Every changelist of the admin and the change page of rows of it (the poisoned ones and the newest few),
    with their history and delete confirmation pages."""
    urls = ["/admin/", "/admin/approvals/approvalrequest/?status=all"]
    poisoned_calls = ToolCall.objects.filter(run_id=poisoned["run"].id).values_list("pk", flat=True)
    urls += [reverse("admin:toolhub_toolcall_change", args=[pk]) for pk in poisoned_calls]
    urls += [
        reverse("admin:toolhub_toolcall_change", args=[pk])
        for pk in ToolCall.objects.filter(tool_name=PAYLOAD).values_list("pk", flat=True)
    ]
    urls.append(reverse("admin:agents_app_agentrun_change", args=[poisoned["run"].pk]))
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        try:
            changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        except NoReverseMatch:
            continue
        urls.append(changelist)
        urls.append(f"{changelist}?q={PAYLOAD}")
        if hasattr(model_admin, "get_queryset"):
            for pk in model.objects.order_by("-pk").values_list("pk", flat=True)[:6]:
                change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk])
                urls += [change, change.replace("/change/", "/history/"), change.replace("/change/", "/delete/")]
    return urls


@pytest.mark.parametrize("who", ["superuser", "acme_operator"])
def test_every_admin_page_shows_planted_markup_only_escaped(
    who: str, poisoned: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    """Planted ``<script>``, an attribute-breaking ``"><img onerror>`` and a ``javascript:`` URL (see ``poisoned``).

    Tried, as the platform's superuser and as acme's operator: the dashboard, every changelist (also searched
    for the payload, which each list echoes), every row's change page (the call timeline, the run page, the
    approval request with its diff and comment, saga and compensation pages, the remote tool's diff), its
    history and its delete confirmation. No page may carry the payload as a tag or a live attribute.
    """
    user: User = request.getfixturevalue(who)
    client = console(user)
    escaped_on: set[str] = set()
    read = 0
    for url in _admin_urls(poisoned):
        response = client.get(url)
        if response.status_code != 200:
            continue
        html = response.content.decode()
        read += 1
        assert live_markup(html) == [], url
        if ESCAPED_SCRIPT in html:
            escaped_on.add(url.split("?")[0])
    run, approval = poisoned["run"], poisoned["request"]
    assert read > 30
    must_show = {
        "/admin/",
        reverse("admin:agents_app_agentrun_change", args=[run.pk]),
        reverse("admin:approvals_approvalrequest_change", args=[approval.pk]),
        reverse("admin:toolhub_toolcall_change", args=[approval.call_id]),
    }
    if who == "superuser":
        remote = RemoteMcpTool.objects.get()
        must_show |= {
            reverse("admin:toolhub_remotemcptool_change", args=[remote.pk]),
            reverse("admin:toolhub_remotemcpserver_change", args=[remote.server_id]),
        }
    assert must_show <= escaped_on, must_show - escaped_on


def test_bulk_action_confirmation_pages_show_planted_markup_only_escaped(
    poisoned: dict[str, Any], acme: AcmeData, acme_operator: User, second_acme_operator: User
) -> None:
    """The confirmation pages of *Approve/Reject selected* (arguments, reason) and of the saga actions.

    Tried as a second acme operator, who may decide the edited request: the intermediate page of each
    bulk action on the poisoned approval request, saga and compensation.
    """
    client = console(second_acme_operator)
    request = poisoned["request"]
    pages = [
        client.post(
            "/admin/approvals/approvalrequest/?status=all",
            {"action": action, "_selected_action": [str(request.pk)]},
        )
        for action in ("approve_selected", "reject_selected")
    ]
    pages.append(
        client.post("/admin/sagas/saga/", {"action": "resolve_selected", "_selected_action": [str(acme.saga.pk)]})
    )
    pages.append(
        client.post(
            "/admin/sagas/compensation/",
            {"action": "resolve_selected", "_selected_action": [str(acme.compensation.pk)]},
        )
    )
    shown = [p.content.decode() for p in pages if p.status_code == 200]
    assert len(shown) >= 2
    assert ESCAPED_SCRIPT in shown[0]
    for html in shown:
        assert live_markup(html) == []
        assert SECRET not in html


def test_browsable_api_pages_show_planted_markup_only_escaped(
    poisoned: dict[str, Any], acme: AcmeData, alice: User
) -> None:
    """alice (the requester) reads her poisoned run, call, approval and the external call as HTML (browsable API).

    A session authenticates the API only for someone the console signs in (staff, ``toolhub.api.sessions``).
    """
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    client = console(alice)
    run, request = poisoned["run"], poisoned["request"]
    urls = [
        f"/api/v1/runs/{run.pk}/",
        f"/api/v1/calls/{request.call_id}/",
        f"/api/v1/calls/{acme.external_call.pk}/",
        f"/api/v1/approvals/{request.pk}/",
        "/api/v1/calls/",
        "/api/v1/runs/",
        "/api/v1/tools/",
        f"/api/v1/calls/?tool={PAYLOAD}",
    ]
    read = escaped = 0
    for url in urls:
        response = client.get(url, HTTP_ACCEPT="text/html")
        html = response.content.decode()
        assert live_markup(html) == [], url
        if response.status_code == 200 and "text/html" in response["Content-Type"]:
            read += 1
            escaped += ESCAPED_SCRIPT in html
    assert read >= 5 and escaped >= 3


# --- 2. outbound URLs ----------------------------------------------------------------------------------------

INTERNAL = ("http://127.0.0.1:5432/", "http://169.254.169.254/latest/meta-data/")


@pytest.mark.parametrize("who", ["acme_developer", "acme_operator"])
def test_tenant_staff_cannot_set_any_url_workers_call_in_the_admin(
    who: str, request: pytest.FixtureRequest, tenant: Tenant
) -> None:
    """acme's developer and operator try to add a model provider and a remote MCP server pointing inside.

    Tried: GET and POST of the add pages of model providers and remote MCP servers with an internal URL,
    the change page of an existing server, and an agent form carrying ``base_url`` / ``url`` fields.
    Nothing with that URL may exist afterwards.
    """
    from agents_app.models import ModelProvider

    user: User = request.getfixturevalue(who)
    client = console(user)
    server = RemoteMcpServer.objects.create(name="probe-e-srv", url="https://tools.example.com/mcp")
    provider_add = reverse("admin:agents_app_modelprovider_add")
    server_add = reverse("admin:toolhub_remotemcpserver_add")
    server_change = reverse("admin:toolhub_remotemcpserver_change", args=[server.pk])
    credential_add = reverse("admin:toolhub_remotemcpcredential_add")
    for url in INTERNAL:
        for page, data in (
            (provider_add, {"name": "inside", "kind": "openai", "base_url": url, "model_name": "m"}),
            (server_add, {"name": "inside", "url": url, "risk": "low", "timeout_seconds": "5"}),
            (server_change, {"name": "probe-e-srv", "url": url, "risk": "low", "timeout_seconds": "5"}),
            (credential_add, {"server": server.pk, "tenant": "acme", "credential_env": "X", "url": url}),
        ):
            assert client.get(page).status_code == 403, page
            assert client.post(page, data).status_code == 403, page
    assert not ModelProvider.objects.filter(base_url__in=INTERNAL).exists()
    assert not RemoteMcpServer.objects.filter(url__in=INTERNAL).exists()
    assert RemoteMcpServer.objects.get(pk=server.pk).url == "https://tools.example.com/mcp"


def test_an_api_user_cannot_name_an_endpoint_for_an_agent_or_a_call(acme_developer: User, alice: User) -> None:
    """Over the API: an agent created with ``base_url``/``credential_env``, a run and a direct call whose
    context names a URL the model provider or webhook would use. Each is refused with 400 and names the key."""
    developer = client_for(acme_developer)
    for key in ("base_url", "credential_env", "webhook_url", "url"):
        answer = developer.post(
            "/api/v1/agents/",
            {"name": f"probe-e-{key.replace('_', '-')}", "tools": [], key: INTERNAL[1]},
            format="json",
        )
        assert answer.status_code == 400, (key, answer.content)
    from agents_app.models import Agent

    assert not Agent.objects.filter(name__startswith="probe-e-").exists()


def test_the_webhook_url_is_platform_configuration_only(acme_operator: User, settings: Any) -> None:
    """The approval webhook goes to ``TOOLHUB['WEBHOOK_URL']`` only: no model or admin page holds a URL for it,
    so tenant staff cannot point deliveries at an internal address."""
    from approvals.models import WebhookDelivery

    names = {f.name for f in WebhookDelivery._meta.get_fields()}
    assert not {"url", "target", "endpoint"} & names
    client = console(acme_operator)
    response = client.get("/admin/approvals/webhookdelivery/add/")
    assert response.status_code in (403, 404)


# --- 3. notifications ------------------------------------------------------------------------------------------


@pytest.fixture
def acme_request_with_secret(alice: User, acme_operator: User, globex_operator: User, settings: Any) -> ApprovalRequest:
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "http://127.0.0.1:9/hook", "APPROVAL_EMAILS": True}
    mail.outbox.clear()
    answer = client_for(alice).post(
        "/api/v1/calls/",
        {"tool": "probe_e_note", "arguments": {"note": "quarterly", "api_token": SECRET}},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    return ApprovalRequest.objects.get(tool_name="probe_e_note")


def test_an_acme_request_mails_acmes_deciders_only_and_never_its_arguments(
    acme_request_with_secret: ApprovalRequest, acme_operator: User, globex_operator: User, alice: User
) -> None:
    """alice's held call in acme: who gets an e-mail, and what it and the webhook say.

    globex's operator (same role, other tenant) and alice (the requester) must get nothing; no message or
    webhook payload may carry the sensitive token or the note.
    """
    recipients = sorted(address for message in mail.outbox for address in message.to)
    assert recipients == [acme_operator.email]
    for message in mail.outbox:
        assert SECRET not in message.body and SECRET not in message.subject
        assert "quarterly" not in message.body
        assert "acme" in message.subject
    payloads = [str(d.payload) for d in WebhookDelivery.objects.all()]
    assert payloads and all(SECRET not in p and "quarterly" not in p for p in payloads)


def test_an_escalation_group_holding_globex_staff_mails_only_acmes_members(
    alice: User, acme_operator: User, globex_operator: User, roles: dict[str, Group], settings: Any
) -> None:
    """A tool group whose approver and fallback groups are the global ``operators`` group (globex's operator
    is in it): the request and its escalation must still e-mail acme's members only."""
    from approvals.unanswered import approvals_escalate_due
    from toolhub.models import ToolGroup

    settings.TOOLHUB = {**settings.TOOLHUB, "APPROVAL_EMAILS": True}
    group = ToolGroup.objects.create(
        name="probe-e-notes",
        extra_tools=["probe_e_note"],
        approver_group=roles["operators"],
        escalation_group=roles["operators"],
    )
    assert group.pk
    mail.outbox.clear()
    answer = client_for(alice).post(
        "/api/v1/calls/",
        {"tool": "probe_e_note", "arguments": {"note": "n", "api_token": SECRET}},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    request = ApprovalRequest.objects.get(tool_name="probe_e_note")
    assert request.approver_group_id == roles["operators"].pk
    ApprovalRequest.objects.filter(pk=request.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))
    assert approvals_escalate_due() == 1
    assert len(mail.outbox) >= 2
    recipients = {address for message in mail.outbox for address in message.to}
    assert recipients == {acme_operator.email}
    assert all(SECRET not in message.body for message in mail.outbox)


# --- 4. agentic state within a tenant ----------------------------------------------------------------------------


@pytest.fixture
def alices_board(acme: AcmeData) -> AgentRun:
    run = acme.ledger_run
    blackboard_put(run, "alice-note", {"value": "ALICE-PRIVATE-7731"}, kind="Note")
    return run


def _carol_run(carol: User, script: list[dict[str, Any]], tools: list[str], context: Any = None) -> AgentRun:
    agent = agent_create(name=f"carol-{uuid.uuid4().hex[:8]}", tenant="acme", tools=tools, script=script)
    try:
        run = run_start(agent=agent, user=carol, input="read the board", context=context)
    except Exception as exc:  # noqa: BLE001 - a refused context is the secure answer
        return exc  # type: ignore[return-value]
    run.refresh_from_db()
    return run


def _seen_by(run: AgentRun) -> str:
    calls = ToolCall.objects.filter(run_id=run.id)
    return " ".join([str(run.messages), run.output or "", *(f"{c.result} {c.error}" for c in calls)])


def test_a_colleagues_run_cannot_read_alices_blackboard_by_naming_her_run(alices_board: AgentRun, carol: User) -> None:
    """carol's run calls ``blackboard_get``/``blackboard_list``/``blackboard_describe`` with alice's run id as an
    extra argument (``run_id``, ``run``) and by the entry's name; alice's value must never reach carol's run."""
    run_id = str(alices_board.id)
    script = [
        {
            "tool_calls": [
                {"name": "blackboard_get", "arguments": {"name": "alice-note", "run_id": run_id}},
                {"name": "blackboard_get", "arguments": {"name": "alice-note"}},
                {"name": "blackboard_list", "arguments": {"run": run_id}},
                {"name": "blackboard_describe", "arguments": {"name": "alice-note"}},
                {"name": "blackboard_last", "arguments": {"kind": "Note"}},
            ]
        },
        {"content": "done"},
    ]
    run = _carol_run(carol, script, ["blackboard_get", "blackboard_list", "blackboard_describe", "blackboard_last"])
    assert isinstance(run, AgentRun)
    calls = list(ToolCall.objects.filter(run_id=run.id).order_by("position"))
    assert [c.status for c in calls] == [CallStatus.INVALID, CallStatus.FAILED, CallStatus.INVALID] + [
        CallStatus.FAILED
    ] * 2
    assert all("blackboard is empty" in c.error for c in calls if c.status == CallStatus.FAILED)
    assert "ALICE-PRIVATE-7731" not in _seen_by(run)


@pytest.mark.parametrize("key", ["parent_run", "parent_run_id", "blackboard_run", "loop"])
def test_a_run_context_naming_alices_run_reaches_nothing_of_it(alices_board: AgentRun, carol: User, key: str) -> None:
    """carol starts a run whose context names alice's run under keys that are not reserved; her run's
    blackboard tools and run tools still read her own run only (or the context is refused)."""
    script = [
        {
            "tool_calls": [
                {"name": "blackboard_get", "arguments": {"name": "alice-note"}},
                {"name": "run_status", "arguments": {}},
            ]
        },
        {"content": "done"},
    ]
    run = _carol_run(carol, script, ["blackboard_get", "run_status"], context={key: str(alices_board.id)})
    if not isinstance(run, AgentRun):
        return_value = str(run)
        assert "ALICE-PRIVATE-7731" not in return_value
        return
    seen = _seen_by(run)
    assert "ALICE-PRIVATE-7731" not in seen
    status = ToolCall.objects.get(run_id=run.id, tool_name="run_status")
    assert status.status == CallStatus.SUCCEEDED and str(alices_board.id) not in str(status.result)


def test_a_colleagues_artifacts_and_writes_stay_on_her_own_board(alices_board: AgentRun, carol: User) -> None:
    """carol's run stores an artifact named like alice's entry and sends ``communicate``/``progress``: alice's
    board and updates are unchanged, carol's entries land on carol's run only."""
    before = list(blackboard_entries(alices_board).values_list("id", flat=True))
    updates_before = AgentRun.objects.get(pk=alices_board.pk).updates
    script = [
        {
            "tool_calls": [
                {"name": "export_file", "arguments": {"name": "alice-note"}},
                {"name": "communicate", "arguments": {"message": "from carol"}},
                {"name": "progress", "arguments": {"status": "carol working"}},
            ]
        },
        {"content": "done"},
    ]
    run = _carol_run(carol, script, ["export_file", "communicate", "progress"])
    assert isinstance(run, AgentRun)
    assert list(blackboard_entries(alices_board).values_list("id", flat=True)) == before
    assert AgentRun.objects.get(pk=alices_board.pk).updates == updates_before
    assert BlackboardEntry.objects.filter(run_id=run.id).exists()
    assert not BlackboardEntry.objects.filter(run_id=alices_board.id).exclude(id__in=before).exists()


@pytest.fixture
def agentic_samples() -> Iterator[None]:
    from tests.agentic import sample_tools

    with registry.temporarily(*sample_tools.ALL):
        yield


@pytest.mark.parametrize(
    "context",
    [
        None,
        {"agentic": {"researcher": {"done": ["search"]}, "order_processor.Order": "confirmed"}},
        {"done": ["search"], "state": "confirmed", "source_run": "ALICE_RUN"},
    ],
)
def test_a_colleagues_run_inherits_no_playbook_or_state_machine_progress_of_alices(
    agentic_samples: None, alice: User, carol: User, context: dict[str, Any] | None
) -> None:
    """alice's run unlocks ``analyze`` (called ``search``) and moves the order machine to ``confirmed``; carol's
    run, with no context or a context naming that progress or alice's run, calls ``analyze`` and ``ship_order``
    first: both must be refused as locked / not available in carol's own state, and run nothing."""
    alices = agent_create(
        name="alice-agentic",
        tenant="acme",
        tools=["researcher", "order_processor"],
        script=[
            {"tool_calls": [{"name": "search", "arguments": {"topic": "tides"}}]},
            {"tool_calls": [{"name": "confirm_order", "arguments": {}}]},
            {"content": "done"},
        ],
    )
    alice_run = run_start(agent=alices, user=alice, input="go")
    alice_run.refresh_from_db()
    assert alice_run.disclosure["agentic"]["researcher"]["done"] == ["search"], alice_run.disclosure
    if context and "source_run" in context:
        context = {**context, "source_run": str(alice_run.id)}
    carols = agent_create(
        name="carol-agentic",
        tenant="acme",
        tools=["researcher", "order_processor"],
        script=[
            {"tool_calls": [{"name": "analyze", "arguments": {}}, {"name": "ship_order", "arguments": {}}]},
            {"content": "done"},
        ],
    )
    carol_run = run_start(agent=carols, user=carol, input="go", context=context)
    carol_run.refresh_from_db()
    calls = {c.tool_name: c for c in ToolCall.objects.filter(run_id=carol_run.id)}
    assert set(calls) == {"analyze", "ship_order"}
    assert calls["analyze"].status == CallStatus.INVALID and "locked" in calls["analyze"].error
    assert calls["ship_order"].status == CallStatus.INVALID
    assert "researcher" not in (carol_run.disclosure or {}).get("agentic", {}) or not carol_run.disclosure["agentic"][
        "researcher"
    ].get("done")


REFLECTED_PARAMS = (
    "q",
    "tool",
    "risk",
    "tenant",
    "agent",
    "user",
    "actor",
    "event_type",
    "status",
    "kind",
    "attention",
    "created_at__gte",
    "created_at__lt",
    "o",
    "p",
)


@pytest.mark.parametrize(
    "changelist",
    [
        "admin:toolhub_toolcall_changelist",
        "admin:toolhub_auditevent_changelist",
        "admin:approvals_approvalrequest_changelist",
        "admin:agents_app_agentrun_changelist",
        "admin:sagas_saga_changelist",
        "admin:approvals_webhookdelivery_changelist",
    ],
)
def test_crafted_filter_and_search_parameters_are_reflected_only_escaped(
    changelist: str, acme: AcmeData, acme_operator: User
) -> None:
    """Reflected XSS: each list's filters, its search, ordering and page, and a parameter whose NAME is the
    payload (kept by the input filters as a hidden field), all set to the payload, one at a time and together;
    also a change page's ``_changelist_filters`` (the link back to the list)."""
    from urllib.parse import urlencode

    client = console(acme_operator)
    base = reverse(changelist)
    queries = [{name: PAYLOAD} for name in REFLECTED_PARAMS]
    queries.append({PAYLOAD: PAYLOAD, "tool": PAYLOAD})
    queries.append(dict.fromkeys(("q", "tool", "agent", "user", "actor"), PAYLOAD))
    read = 0
    for query in queries:
        response = client.get(f"{base}?{urlencode(query)}", follow=True)
        html = response.content.decode()
        assert live_markup(html) == [], query
        read += response.status_code == 200
    change = reverse("admin:toolhub_toolcall_change", args=[acme.external_call.pk])
    back = client.get(f"{change}?{urlencode({'_changelist_filters': urlencode({'q': PAYLOAD, 'x': JS_URL})})}")
    assert back.status_code == 200 and live_markup(back.content.decode()) == []
    assert read >= 1
