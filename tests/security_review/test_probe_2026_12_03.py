"""Adversarial probe (2026-12-03) of the tenant boundary and the grants on the newest surfaces.

As a user of tenant acme (a member, an operator, an API client, an agent run of acme) try to learn
something about tenant globex or about tools one is not granted: tool search hits and categories,
unfolding facades, tool groups and ``reset_equipped_tools``, unknown-tool answers, the stored rows
of refused calls, admin autocomplete, list filters.

Tests named ``test_leak_*`` show a leak found by this probe that is still open: each is a strict expected
failure (it fails the suite once the leak is fixed, so that it becomes a regression test). The others
passed when written, or were fixed, and stay as regression tests; a fixed one says what it found.
"""

import json
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

import tests.disclosure.conftest as disclosure_fixtures
from agents_app.models import RunStatus
from agents_app.services import agent_create
from tests.disclosure.conftest import Recorder, answer, call
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, make_user
from toolhub.catalogue import tool_catalogue_sync
from toolhub.feedback import default_unknown_tool_message
from toolhub.models import AuditEvent, CallStatus, Grant, GrantEffect, Tenant, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

# The progressive-disclosure suite's fixtures (sample tools and facades, a recording model, agents, runs).
disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def _deny_by_default(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}


# --- tool groups bound to another tenant by their activation rules ----------------------------------------


@pytest.mark.parametrize("wanted", ["payments", "no_such_group"])
def test_a_group_activated_only_for_globex_is_neither_equipped_offered_nor_prompted_in_acme(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, wanted: str
) -> None:
    # given: payments is globex's (rule on the tenant) with a prompt addition; reports is for everyone
    ToolGroup.objects.create(
        name="payments", activation_rules=[{"tenants": ["globex"]}], system_prompt_addition="GLOBEX-PAYMENTS-PROMPT"
    )
    ToolGroup.objects.create(name="reports")
    script = [call("reset_equipped_tools", groups=[wanted]), call("list_payments"), answer()]
    agent = make_agent(
        script=script,
        tools=["clock", "list_payments", "refund_payment", "sales_report"],
        group_switching=True,
    )

    # when alice (acme) tries to equip it
    run = start_run(agent, alice)

    # then it answers exactly like a group that does not exist, offering only acme's eligible groups
    reset, listed = _calls(run)
    assert reset.status == CallStatus.FAILED
    assert reset.error == f"Unknown tool group(s) {wanted!r}. Groups you may equip: reports."
    assert run.disclosure["active_groups"] is None
    for turn in range(len(recorder.turns)):
        assert "list_payments" not in recorder.names(turn) and "refund_payment" not in recorder.names(turn)
        assert "GLOBEX-PAYMENTS-PROMPT" not in recorder.turns[turn]["system"]
    assert "GLOBEX-PAYMENTS-PROMPT" not in json.dumps(run.messages)
    # documented: visibility is not a permission (README, "Progressive disclosure"); a granted tool named
    # directly still runs, and that reveals nothing of globex's group (no prompt addition, above)
    assert (listed.tool_name, listed.status) == ("list_payments", CallStatus.SUCCEEDED)


def test_tool_search_never_names_tools_of_a_group_activated_only_for_another_tenant(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """``tool_search`` respects the groups' activation rules: a tool of another tenant's group is not found.

    Found by this probe (the index now holds only tools in no group or in an eligible one):

    ``payments`` is active only for globex (``activation_rules=[{"tenants": ["globex"]}]``); acme's runs never
    show its tools (``_disclose`` filters them out) and cannot equip it (``reset_equipped_tools`` answers
    "Unknown tool group"). Yet acme's search index (``toolhub.disclosure.search.searchable_names``: every
    granted tool, without the group filter) holds them: the search's result names ``refund_payment`` to
    acme's model and promises "their definitions are available from your next turn", which never happens.
    """
    ToolGroup.objects.create(name="payments", activation_rules=[{"tenants": ["globex"]}])
    script = [call("tool_search", query="refund payment customer"), answer()]
    agent = make_agent(script=script, tools=["clock", "get_weather", "refund_payment"], tool_search=True)

    run = start_run(agent, alice)

    [search] = _calls(run)
    assert search.status == CallStatus.SUCCEEDED
    assert "refund_payment" not in recorder.names(1)  # never shown: its group is not acme's
    assert search.result["tools"] == [], f"tool_search named {search.result['tools']} from globex's group"


# --- tool search: categories and hits of denied tools and of another tenant's grants -----------------------


def test_a_search_in_the_category_of_denied_and_globex_only_tools_answers_like_an_unknown_category(
    make_agent: Any, start_run: Any, alice: User, other_tenant: Tenant, settings: Any, recorder: Recorder
) -> None:
    # given: grants required; alice may use the weather; globex alone the mail; the payments are denied to her
    _deny_by_default(settings)
    Grant.objects.create(tool_name="get_weather", user=alice)
    Grant.objects.create(tool_name="clock", user=alice)
    Grant.objects.create(tool_name="send_email", tenant=other_tenant)
    Grant.objects.create(tool_name="refund_payment", tenant=other_tenant)
    Grant.objects.create(tool_name="refund_payment", effect=GrantEffect.DENY, user=alice)
    queries = [
        ("send email message address", "mail"),
        ("refund payment customer", "payments"),
        ("send email refund payment", "no-such-category"),
    ]
    script = [*(call("tool_search", query=q, category=c, max_results=20) for q, c in queries), answer()]
    agent = make_agent(script=script, tools=["clock", "get_weather", "send_email", "refund_payment"], tool_search=True)

    run = start_run(agent, alice)

    searches = _calls(run)
    assert [s.status for s in searches] == [CallStatus.SUCCEEDED] * 3
    assert [s.result for s in searches] == [searches[2].result] * 3
    assert searches[2].result["tools"] == []
    for turn in range(len(recorder.turns)):
        assert {"send_email", "refund_payment"}.isdisjoint(recorder.names(turn))


# --- unfolding facades whose children are denied -----------------------------------------------------------


def test_unfolding_a_facade_never_lists_a_nested_facade_whose_tools_are_all_denied(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """A facade's unfold and context results leave out a nested facade the principal can use nothing of.

    Found by this probe (fixed by ``unfolding.usable_tools``, the one rule for every listing):

    alice is denied both tools of ``user_management`` (``create_user``, ``find_user``). ``_disclose`` rightly
    never shows ``user_management`` (every inner tool denied), but ``UnfoldingTool._unfold`` / ``_context``
    of ``admin_operations`` filter children with ``authorize_tools`` only, and a nested facade is a
    navigation tool that the agent's say alone allows (``authorization._verdict``: ``navigation``). So the
    model reads ``user_management`` and its description ("User management operations.") in the results
    (and the context tool also gives its parameter schema with the category enum ``read``/``write``/``all``).
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="create_user", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="find_user", user=alice)
    script = [call("admin_operations"), call("admin_operations_context"), answer()]
    agent = make_agent(script=script, tools=["admin_operations"])

    run = start_run(agent, alice)

    unfold, context = _calls(run)
    assert unfold.status == context.status == CallStatus.SUCCEEDED
    assert "user_management" not in recorder.names(1)  # _disclose hides it, and so do the results
    assert [t["name"] for t in unfold.result["tools"]] == ["status"], unfold.result
    assert [t["name"] for t in context.result["tools"]] == ["status"], context.result


def test_a_by_category_facade_offers_only_the_categories_holding_a_tool_the_caller_may_use(
    make_agent: Any, start_run: Any, alice: User, alice_client: APIClient, recorder: Recorder
) -> None:
    """A category of denied tools reads exactly like one that does not exist, wherever the facade shows.

    Found by this probe (fixed by ``unfolding.tool_seen_by``, the facade as its caller sees and calls it):

    alice is denied ``insert_record`` and ``delete_record``, the whole ``write`` category of
    ``file_operations``. The facade was shown with ``"enum": ["read", "write"]`` (built from its definition,
    never from the grants), and calling it with ``write`` answered "file_operations has no tools you may use
    for these arguments." (FAILED) where a category that does not exist answered INVALID: the category and
    that it holds tools she is denied both showed. Likewise a nested by-category facade's schema in its
    parent's context result, the provider exports and the JSON catalogue.
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="insert_record", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="delete_record", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="create_user", user=alice)
    script = [
        call("file_operations", category="write"),
        call("file_operations", category="nope"),
        call("admin_operations_context"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["file_operations", "admin_operations"])

    run = start_run(agent, alice)

    denied, missing, context = _calls(run)
    enum = recorder.tool(0, "file_operations")["parameters"]["properties"]["category"]["enum"]
    assert enum == ["read"]
    assert (denied.status, missing.status) == (CallStatus.INVALID, CallStatus.INVALID)
    assert denied.error.replace("'write'", "'nope'") == missing.error, (denied.error, missing.error)
    for refused in (denied, missing):
        assert "insert_record" not in refused.error and "'write'" not in refused.error.split("Input")[-1]
        assert "read" in refused.error  # the one category she may unfold is offered
    nested = {t["name"]: t for t in context.result["tools"]}["user_management"]
    assert nested["parameters"]["properties"]["category"]["enum"] == ["all", "read"]
    # and the same view wherever the catalogue is read
    exported = {t["function"]["name"]: t for t in alice_client.get("/api/v1/tools/export/openai/").json()}
    assert exported["file_operations"]["function"]["parameters"]["properties"]["category"]["enum"] == ["read"]
    tool_catalogue_sync()
    listed = {t["name"]: t for t in alice_client.get("/api/v1/tools/?page_size=500").json()["results"]}
    assert listed["file_operations"]["input_schema"]["properties"]["category"]["enum"] == ["read"]
    assert listed["clock"]["input_schema"] == registry_schema("clock")


def registry_schema(name: str) -> Any:
    from toolhub.tools.registry import registry

    tool = registry.get(name)
    assert tool is not None
    return tool.json_schema


# --- a tool outside the run's catalogue, named by the model -----------------------------------------------


def test_a_run_calling_a_tool_outside_its_catalogue_reads_it_as_unknown(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """In a run, a tool the run may not use reads like a missing one, with or without valid arguments.

    Found by this probe: the agent has ``clock`` only and alice is denied ``refund_payment``; the model
    calling ``refund_payment`` without arguments read its parameter schema in a validation error (arguments
    were read before grants), and with them read "is denied to you". Now grants are decided before the
    arguments are read, and the loop answers a call denied a tool the run cannot see as the REST API and
    MCP do: as an unknown tool. The rows keep the truth for auditors (denied, with the reason).
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    script = [call("refund_payment"), call("refund_payment", payment="p1"), call("no_such_tool"), answer()]
    agent = make_agent(script=script, tools=["clock"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    bad_arguments, good_arguments, unknown = _calls(run)
    read = [m["content"] for m in recorder.turns[-1]["messages"] if m.get("role") == "tool"]
    assert read == [
        default_unknown_tool_message("refund_payment", ["clock"]),
        default_unknown_tool_message("refund_payment", ["clock"]),
        default_unknown_tool_message("no_such_tool", ["clock"]),
    ]
    assert (unknown.status, unknown.error) == (CallStatus.INVALID, read[2])
    for denied in (bad_arguments, good_arguments):
        assert denied.status == CallStatus.DENIED and "payment" not in denied.error.replace("refund_payment", "")


# --- the REST API: a refused call's stored row ------------------------------------------------------------


def test_the_caller_reads_back_a_refused_call_of_a_tool_they_may_not_see_as_it_was_answered(
    alice: User, alice_client: APIClient, operator_client: APIClient, settings: Any
) -> None:
    """A caller's own rows of a denied tool read like a missing tool's, in lists, filters and details.

    Found by this probe (fixed by ``toolhub.caller_view``): with grants required and alice granted
    ``get_weather`` only, ``POST {"tool": "refund_payment", ...}`` answered 404 "Unknown tool 'refund_payment'.
    ..." exactly like ``no_such_tool``, but ``GET /api/v1/calls/?tool=refund_payment`` listed her rows as
    ``status: "denied"`` with "Tool 'refund_payment' is not granted to you", ``?status=denied`` found them,
    and the detail's audit events said ``call.denied``. Operators and auditors still read the truth.
    """
    _deny_by_default(settings)
    Grant.objects.create(tool_name="get_weather", user=alice)
    answers = {
        name: alice_client.post("/api/v1/calls/", {"tool": name, "arguments": arguments}, format="json")
        for name, arguments in [("refund_payment", {}), ("no_such_tool", {})]
    }
    assert {name: r.status_code for name, r in answers.items()} == {"refund_payment": 404, "no_such_tool": 404}
    alice_client.post("/api/v1/calls/", {"tool": "refund_payment", "arguments": {"payment": "p1"}}, format="json")

    listed = alice_client.get("/api/v1/calls/?tool=refund_payment").json()["results"]
    missing = alice_client.get("/api/v1/calls/?tool=no_such_tool").json()["results"]

    assert len(listed) == 2 and len(missing) == 1
    assert missing[0]["error"].startswith("Unknown tool 'no_such_tool'.")
    seen = sorted((row["status"], row["error"]) for row in listed)
    assert all(
        (status, error.split(".")[0]) == ("invalid", "Unknown tool 'refund_payment'") for status, error in seen
    ), seen
    # the status filter agrees with what she reads
    by_status = {
        status: sorted(r["tool"] for r in alice_client.get(f"/api/v1/calls/?status={status}").json()["results"])
        for status in ("denied", "invalid")
    }
    assert by_status == {"denied": [], "invalid": ["no_such_tool", "refund_payment", "refund_payment"]}
    # the detail's audit events read as a missing tool's, and no reader of one call sees the chain's positions
    hidden = alice_client.get(f"/api/v1/calls/{listed[0]['id']}/").json()
    unknown = alice_client.get(f"/api/v1/calls/{missing[0]['id']}/").json()
    shape = [(e["event_type"], e["status"], sorted(e["data"])) for e in unknown["audit_events"]]
    assert [(e["event_type"], e["status"], sorted(e["data"])) for e in hidden["audit_events"]] == shape
    assert hidden["audit_events"][-1]["data"]["reason"] == hidden["error"]
    assert all(e[f] is None for e in hidden["audit_events"] for f in ("chain", "seq", "prev_hash", "hash"))
    # operators read the stored truth
    truth = operator_client.get(f"/api/v1/calls/{listed[0]['id']}/").json()
    assert truth["status"] == "denied" and truth["error"].startswith("Tool 'refund_payment' is not granted")
    assert [e["event_type"] for e in truth["audit_events"]] == ["call.requested", "call.denied"]
    # a place in a chain: in acme's own chains, its staff read it (tests/audit/test_tenant_chains.py)
    assert all(e["hash"] and e["seq"] for e in truth["audit_events"])
    assert len(operator_client.get("/api/v1/calls/?status=denied").json()["results"]) == 2


def test_a_refused_call_of_a_tool_the_caller_may_see_reads_as_stored(
    alice: User, alice_client: APIClient, settings: Any
) -> None:
    """The mask is only for tools hidden from the caller now: a denial of a tool they may call today reads as stored."""
    Grant.objects.create(tool_name="get_weather", user=alice, effect=GrantEffect.DENY)
    denied = alice_client.post("/api/v1/calls/", {"tool": "get_weather", "arguments": {"city": "Paris"}}, format="json")
    assert denied.status_code == 404  # denied, and so hidden from her: answered as unknown
    Grant.objects.filter(tool_name="get_weather").delete()  # granted again (allowed by default)

    [row] = alice_client.get("/api/v1/calls/?tool=get_weather").json()["results"]

    assert (row["status"], row["error"]) == ("denied", "Tool 'get_weather' is denied to you; do not call it.")
    assert [r["id"] for r in alice_client.get("/api/v1/calls/?status=denied").json()["results"]] == [row["id"]]


# --- the agent API: the unknown-tool answer of agent creation ---------------------------------------------


def test_creating_an_agent_with_an_unknown_tool_names_only_tools_the_creator_may_see(
    tenant: Tenant, settings: Any
) -> None:
    """The refusal of an unknown tool suggests among the creator's own tools, not the whole registry.

    Found by this probe: someone of acme who may create agents (``agents_app.add_agent``) but holds no
    catalogue role (``toolhub.view_tooldefinition``), granted only ``calculate``, was answered "Known tools:
    <every registered tool>".
    """
    _deny_by_default(settings)
    builder = make_user("acme-builder", tenant=tenant, permissions=("agents_app.add_agent",))
    Grant.objects.create(tool_name="calculate", user=builder)
    client = client_for(builder)
    assert [t["name"] for t in client.get("/api/v1/tools/").json()["results"]] == ["calculate"]

    refused = client.post(
        "/api/v1/agents/",
        {"name": "rocketeer", "model": {"provider": "scripted", "script": []}, "tools": ["launch_rockets"]},
        format="json",
    )

    assert refused.status_code == 400
    detail = refused.json()["detail"]
    assert detail == "Unknown tool 'launch_rockets'. Available tools: calculate."
    for hidden in ("refund_payment", "send_email", "delete_record", "create_order", "debit"):
        assert hidden not in detail, detail


# --- list filters and admin autocomplete across the boundary ----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_list_filters_naming_acmes_rows_answer_globex_exactly_like_missing_ones(
    acme: AcmeData, globex_operator: User
) -> None:
    client = client_for(globex_operator)
    run, missing = acme.ledger_run.id, "00000000-0000-0000-0000-000000000000"
    for base, pending in (("/api/v1/calls/", "pending_approval"), ("/api/v1/approvals/", "pending")):
        for theirs, nothing in [(f"?run={run}", f"?run={missing}"), ("?tool=debit", "?tool=no_such_tool")]:
            answers = [client.get(f"{base}{query}") for query in (theirs, nothing)]
            assert answers[0].status_code == answers[1].status_code, (base, theirs)
            assert answers[0].json() == answers[1].json(), (base, theirs)
        assert client.get(f"{base}?status={pending}").json()["results"] == []
    assert client.get(f"/api/v1/sagas/{acme.saga.key}/").json() == client.get(f"/api/v1/sagas/{missing}/").json()
    # acme's own people see them (the filters do work)
    alice = client_for(acme.ledger_run.user)
    assert alice.get(f"/api/v1/calls/?run={run}").json()["results"]
    assert alice.get("/api/v1/approvals/?status=pending").json()["results"]


def _autocomplete_sources() -> list[tuple[str, str, str]]:
    """Every relation field of every model whose target the admin registers: what /admin/autocomplete/ takes."""
    from django.contrib import admin

    sources = []
    for model in apps.get_models():
        for field in model._meta.get_fields():
            remote = getattr(getattr(field, "remote_field", None), "model", None)
            if field.concrete and remote in admin.site._registry:
                sources.append((model._meta.app_label, model._meta.model_name, field.name))
    return sources


@pytest.mark.django_db(transaction=True)
def test_admin_autocomplete_of_globex_staff_returns_nothing_of_acme(acme: AcmeData, globex_operator: User) -> None:
    # acme's own agent (the fixture's agents are global ones, which everyone may see)
    agent_create(name="acme-private-agent", tenant="acme", script=[answer()], tools=["calculate"])
    client = Client()
    client.force_login(globex_operator)
    markers = ["alice", "ACME Corp", "acme-private-agent", str(acme.ledger_run.id), str(acme.artifact_call.id)]
    markers.append(acme.saga.key)
    answered = 0
    for app_label, model_name, field_name in _autocomplete_sources():
        for term in ("", "a", "acme", "alice", str(acme.ledger_run.id), str(acme.artifact_call.id), acme.saga.key):
            response = client.get(
                "/admin/autocomplete/",
                {"app_label": app_label, "model_name": model_name, "field_name": field_name, "term": term},
            )
            if response.status_code != 200:
                assert response.status_code in (403, 404), (app_label, model_name, field_name, response.status_code)
                continue
            answered += 1
            text = response.content.decode()
            leaked = [marker for marker in markers if marker in text]
            assert not leaked, (app_label, model_name, field_name, term, text[:500])
    assert answered  # some autocomplete did answer (users, groups, ...): the probe reached the view


# --- the console's figures: approval desk, dashboard, audit chain status ----------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_and_approval_figures_of_globex_staff_count_nothing_of_acme(
    acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    from django.utils import timezone

    from approvals.dashboard import approval_latency_figures
    from approvals.services import approval_approve
    from toolhub.dashboard import dashboard

    # an acme request decided, for the latency figure; the other stays pending
    second = _run_order(acme)
    approval_approve(request_id=second.pk, user=acme_operator, comment="ok")
    theirs, ours = dashboard(globex_operator), dashboard(acme_operator)

    assert ours.pending_approvals >= 1 and ours.by_status
    assert (theirs.pending_approvals, theirs.by_status) == (0, [])
    assert "debit" not in str(theirs.chart) and "create_order" not in str(theirs.chart)
    since = timezone.now() - timezone.timedelta(hours=1)
    assert approval_latency_figures(globex_operator, since) == [("approval latency p50 / p95", "-")]
    assert approval_latency_figures(acme_operator, since) != [("approval latency p50 / p95", "-")]
    page = Client()
    page.force_login(globex_operator)
    index = page.get("/admin/").content.decode()
    assert "debit" not in index and "create_order" not in index and "alice" not in index


def _run_order(acme: AcmeData) -> Any:
    from agents_app.services import run_start
    from approvals.models import ApprovalRequest
    from tests.tenancy.conftest import ORDER_SCRIPT

    agent = acme.waiting_run.agent
    assert agent.script == ORDER_SCRIPT
    run = run_start(agent=agent, user=acme.waiting_run.user, input="another order for acme")
    return ApprovalRequest.objects.get(call__run_id=run.id)


@pytest.mark.django_db(transaction=True)
def test_the_audit_chain_banner_shows_platform_figures_only_to_those_who_cross_tenants(
    acme: AcmeData, globex_auditor: User
) -> None:
    """A verification covers every tenant's chains: its event count and problems are the platform's.

    Found by this probe: globex's auditor, who sees no audit event, read "(<N> events)" with N all of
    acme's. Now a tenant's staff see the state and the times; a superuser still sees the figures.
    """
    from django.core.management import call_command

    from toolhub.models import AuditEvent

    acmes = AuditEvent.objects.filter(tenant="acme").count()
    assert acmes and not AuditEvent.objects.exclude(tenant="acme").exclude(tenant="").exists()
    call_command("verify_audit", "--no-progress", verbosity=0)
    total = AuditEvent.objects.count()
    page = Client()
    page.force_login(globex_auditor)
    platform = Client()
    platform.force_login(User.objects.create_superuser("platform", "platform@example.com", "x"))

    for url in ("/admin/toolhub/auditevent/", "/admin/toolhub/toolcall/"):
        tenants_view = page.get(url).content.decode()
        platform_view = platform.get(url).content.decode()

        assert "Audit trail: verified" in tenants_view and "last verified" in tenants_view
        assert f"({total} events" not in tenants_view and "checkpoint #" not in tenants_view
        assert f"({total} events" in platform_view


# --- admin pages Django adds around each model: history, the "view on site" shortcut ----------------------


@pytest.mark.django_db(transaction=True)
def test_admin_history_and_shortcut_of_acmes_rows_answer_globex_like_missing_ones(
    acme: AcmeData, globex_operator: User
) -> None:
    from django.contrib.contenttypes.models import ContentType

    from agents_app.models import AgentRun
    from approvals.models import ApprovalRequest

    page = Client()
    page.force_login(globex_operator)
    rows = [
        (AgentRun, "agents_app/agentrun", str(acme.ledger_run.pk), "00000000-0000-0000-0000-000000000000"),
        (ApprovalRequest, "approvals/approvalrequest", str(acme.approval.pk), "987654321"),
    ]
    for model, path, theirs, missing in rows:
        history = [page.get(f"/admin/{path}/{pk}/history/", follow=True) for pk in (theirs, missing)]
        assert [r.status_code for r in history] == [200, 200]
        assert [r.redirect_chain[-1][0] for r in history] == ["/admin/", "/admin/"], path
        messages = [[str(m) for m in r.context["messages"]] for r in history]
        assert messages[0] == [m.replace(missing, theirs) for m in messages[1]], messages
        content_type = ContentType.objects.get_for_model(model).pk
        shortcut = [page.get(f"/admin/r/{content_type}/{pk}/") for pk in (theirs, missing)]
        assert [r.status_code for r in shortcut] == [404, 404]
        assert shortcut[0].content == shortcut[1].content


def test_the_provider_export_leaves_out_a_facade_whose_tools_are_all_denied(
    alice: User, alice_client: APIClient
) -> None:
    """``GET /api/v1/tools/export/<provider>/`` leaves out a facade the caller can use nothing of.

    Found by this probe (fixed by ``unfolding.usable_tools``, as a run's tools are):

    alice is denied both tools of ``user_management`` (``create_user``, ``find_user``); with tools allowed by
    default the export still lists ``user_management`` and ``user_management_context`` with their descriptions
    ("User management operations.", "What the tools of user_management are for ..."): ``api.views._tools_for``
    keeps every tool ``authorize_tools`` passes, facades included, while a run hides such a facade
    (``visibility._disclose``) and MCP lists no facade at all (``mcp_discovery.callable_names``).
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="create_user", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="find_user", user=alice)

    exported = alice_client.get("/api/v1/tools/export/openai/")

    assert exported.status_code == 200, exported.content
    names = {tool["function"]["name"] for tool in exported.json()}
    assert "find_user" not in names and "create_user" not in names
    assert "query_table" in names  # the export does hold the sample tools
    assert {"user_management", "user_management_context"}.isdisjoint(names), sorted(names)


def test_a_runs_refused_call_of_a_tool_its_user_may_not_see_reads_as_the_model_was_answered(
    make_agent: Any, start_run: Any, alice: User, alice_client: APIClient, operator_client: APIClient
) -> None:
    """The run's page in the API shows its user the answer the model got (unknown tool); operators the denial."""
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    agent = make_agent(script=[call("refund_payment", payment="p1"), answer()], tools=["clock", "refund_payment"])

    run = start_run(agent, alice)

    [mine] = alice_client.get(f"/api/v1/runs/{run.id}/").json()["tool_calls"]
    [truth] = operator_client.get(f"/api/v1/runs/{run.id}/").json()["tool_calls"]
    assert (mine["status"], mine["error"].split(".")[0]) == ("invalid", "Unknown tool 'refund_payment'")
    # the model was offered its run's tools, the user reads suggestions among the tools she may call herself
    assert "Unknown tool 'refund_payment'. Available tools: clock." in json.dumps(run.messages)
    assert "refund_payment" not in mine["error"].split(".", 1)[1]
    assert (truth["status"], truth["error"]) == ("denied", "Tool 'refund_payment' is denied to you; do not call it.")


def test_an_events_place_in_the_shared_chains_is_shown_only_to_those_who_cross_tenants(
    operator: User, request_call: Any, alice: User, tenant: Tenant
) -> None:
    """Found by this probe: acme's staff read each event's ``chain`` and ``seq`` in the admin and the API.

    Every tenant's events share the chains (``AUDIT_CHAINS``, picked by call id), so the gap between two of
    acme's sequence numbers in one chain counts globex's events in between: its activity, to the event.
    The hashes stay for staff (they reveal nothing); the positions are for those who cross tenants.
    """
    call = request_call("record_effect", {"note": "hello"}, alice, tenant=tenant.slug)
    event = AuditEvent.objects.filter(call_id=call.pk).first()
    assert event is not None
    platform = User.objects.create_superuser("platform", "platform@example.com", "platform-password")
    pages = {
        name: (Client(), f"/admin/toolhub/auditevent/{path}")
        for name, path in [("list", "?"), ("detail", f"{event.pk}/change/")]
    }
    for name, (client, url) in pages.items():
        client.force_login(operator)
        tenant_page = client.get(url).content.decode()
        client.force_login(platform)
        platform_page = client.get(url).content.decode()
        assert event.hash in tenant_page or name == "list", tenant_page[:200]
        assert "record_effect" in tenant_page and "record_effect" in platform_page
        for column in ("column-chain", "column-seq") if name == "list" else ("field-chain", "field-seq"):
            assert column not in tenant_page and column in platform_page, (name, column)
