"""Adversarial probe (2026-12-04, o) of progressive disclosure: what a principal is not granted must never surface.

Each test states the secure behaviour; those that fail on the code as probed are findings (their docstrings say
``Found: ... / Expect: ...``).
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

import tests.disclosure.conftest as disclosure_fixtures
import tests.mcp.conftest as mcp_fixtures
from agents_app.models import RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from tests.security_review.conftest import client_for
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

# The progressive-disclosure suite's fixtures (sample tools and facades, a recording model, agents, runs).
disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run
# The MCP suite's live server (uvicorn on a free port).
live_asgi = mcp_fixtures.live_asgi


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_the_run_api_stored_disclosure_names_no_denied_inner_tool(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: after a facade is unfolded, ``state_after_calls`` stores ``facade.select(arguments)`` (every
    declared child, before grants) in ``AgentRun.disclosure["unfolded"]``, and ``GET /api/v1/runs/{id}/``
    (``RunSerializer.disclosure``) and the admin's "Visible tools" show it raw: the name of an inner tool
    denied to the run's user is listed, although the unfold's result and the model's tools leave it out.
    / Expect: the stored and shown disclosure state names no tool the principal may not call.
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="delete_record", user=alice)
    agent = make_agent(script=[call("database_operations"), answer()], tools=["database_operations"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    [unfold] = _calls(run)
    assert "delete_record" not in json.dumps(unfold.result)  # the call's own answer leaves it out
    assert "delete_record" not in recorder.names(1)  # and the model is never shown it
    body = client_for(alice).get(reverse("run-detail", args=[run.id])).json()
    assert "delete_record" not in json.dumps(body["disclosure"]), body["disclosure"]


def test_unfolding_a_facade_lists_no_inner_tool_of_a_group_bound_to_another_tenant(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: a facade's unfold result and its ``<name>_context`` tool list the inner tools the caller is
    *granted* (``usable_tools``), without the groups' activation rules: an inner tool in a group bound to
    another tenant (``activation_rules=[{"tenants": ["globex"]}]``) is named, described (and its parameters
    given) to acme's model with "available from your next turn", yet never shown (``_disclose`` filters it),
    just as tool search once did (probe 2026-12-03). / Expect: neither the unfold's answer nor the context
    tool names a tool of a group that is not eligible for the run.
    """
    ToolGroup.objects.create(
        name="globex_only", activation_rules=[{"tenants": ["globex"]}], extra_tools=["delete_record"]
    )
    script = [call("database_operations"), call("database_operations_context"), answer()]
    agent = make_agent(script=script, tools=["database_operations"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert "delete_record" not in recorder.names(1) and "delete_record" not in recorder.names(2)
    unfold, context = _calls(run)
    assert unfold.status == context.status == CallStatus.SUCCEEDED
    assert "delete_record" not in json.dumps(unfold.result), unfold.result
    assert "delete_record" not in json.dumps(context.result), context.result


def test_a_facade_in_a_group_bound_to_another_tenant_is_not_shown(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: ``_disclose`` exempts navigation tools (facades, their context tools) from the groups' filter
    (``not is_navigation(name)``), so a facade an operator put in a group bound to another tenant
    (``extra_tools``, ``activation_rules=[{"tenants": ["globex"]}]``) is shown to acme's model, with its
    description, and unfolds. / Expect: a tool in a group not eligible for the run is hidden, facades too
    (README: "A tool in an inactive group is hidden; a tool in no group never is").
    """
    ToolGroup.objects.create(
        name="globex_db", activation_rules=[{"tenants": ["globex"]}], extra_tools=["database_operations"]
    )
    agent = make_agent(script=[answer()], tools=["clock", "database_operations"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert recorder.names(0) == ["clock"], recorder.names(0)


def _revoking_tool() -> Any:
    from toolhub import Risk, tool

    @tool(risk=Risk.LOW)
    def revoke_mail() -> str:
        """Deny send_email to every user of tenant acme (an administrator acting while the run goes on)."""
        from toolhub.models import Tenant

        Grant.objects.create(effect=GrantEffect.DENY, tool_name="send_email", tenant=Tenant.objects.get(slug="acme"))
        return "revoked"

    return revoke_mail


def test_a_grant_revoked_mid_run_hides_the_tool_on_the_very_next_turn(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Secure behaviour (sound when probed): a deny grant written between two turns hides the tool next turn."""
    from toolhub.tools.registry import registry

    revoke = _revoking_tool()
    with registry.temporarily(revoke):
        agent = make_agent(script=[call("revoke_mail"), answer()], tools=["send_email", "revoke_mail"])
        run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert "send_email" in recorder.names(0)
    assert "send_email" not in recorder.names(1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_find_tools_with_a_nul_in_the_category_answers_a_readable_refusal(
    live_asgi: str, settings: Any, alice: User
) -> None:
    """Found: with the ``postgres`` provider, ``toolhub_find_tools {"category": "\\u0000"}`` passes the NUL to
    psycopg (``PostgresIndex.search``), which raises ``DataError`` ("PostgreSQL text fields cannot contain NUL");
    nothing catches it, so the client gets an internal error instead of an error result naming the field.
    / Expect: an odd category (a NUL) is answered as a bad input or as no match, never an internal error.
    """
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from tests.mcp.conftest import token, with_client
    from toolhub.tools.registry import registry

    settings.TOOLHUB = {**settings.TOOLHUB, "TOOL_SEARCH_PROVIDER": "postgres"}

    async def body(client: Client) -> Any:
        try:
            return await client.call_tool("toolhub_find_tools", {"query": "weather forecast", "category": "a\x00b"})
        except MCPError as exc:
            return exc

    with registry.temporarily(*disclosure_fixtures.sample_tools.PLAIN):
        answered = with_client(live_asgi, token(alice), body)

    assert not isinstance(answered, MCPError), f"internal error: {answered}"


def test_a_member_of_two_tenants_lists_no_tool_denied_in_both_without_naming_one(
    settings: Any, globex_user: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Found: ``GET /api/v1/tools/`` (and ``/tools/export/<provider>/``) of a member of several tenants without
    ``?tenant=`` authorizes for tenant ``""`` (``_tools_for``), so no tenant's grant applies: a tool both of
    their tenants deny (``Grant(effect=deny, tenant=...)``) is listed with its schema because a user grant
    allows it, although a call of it is refused in either tenant (deny wins) and a call without a tenant is
    refused ("You belong to several tenants"). / Expect: a tool denied in every tenant of the caller is never
    listed (or the request must name the tenant, as a call must).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    globex_user.tenant_memberships.create(tenant=tenant)
    Grant.objects.create(tool_name="calculate", user=globex_user)
    Grant.objects.create(tool_name="calculate", tenant=tenant, effect=GrantEffect.DENY)
    Grant.objects.create(tool_name="calculate", tenant=other_tenant, effect=GrantEffect.DENY)
    client = client_for(globex_user)
    assert "calculate" not in json.dumps(client.get("/api/v1/tools/?tenant=acme").json())
    assert "calculate" not in json.dumps(client.get("/api/v1/tools/?tenant=globex").json())

    listed = client.get("/api/v1/tools/?page_size=500")
    exported = client.get("/api/v1/tools/export/openai/")

    assert "calculate" not in json.dumps(listed.json()), "listed without ?tenant="
    assert "calculate" not in json.dumps(exported.json()), "exported without ?tenant="


def test_an_unknown_tool_answer_suggests_no_tool_of_a_group_bound_to_another_tenant(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: a run's call of a missing tool is answered ``Unknown tool 'x'. Did you mean: ...?`` from
    ``visible_tool_names`` (every agent tool the principal is granted), without the groups' activation rules:
    acme's model is offered ``refund_payment``, a tool of a group bound to globex
    (``activation_rules=[{"tenants": ["globex"]}]``) that acme's runs never show, search never finds and
    ``reset_equipped_tools`` answers as unknown. / Expect: a suggestion never names a tool of a group that is
    not eligible for the run.
    """
    ToolGroup.objects.create(name="payments", activation_rules=[{"tenants": ["globex"]}])
    script = [call("refund_paymnt", payment="p1"), answer()]
    agent = make_agent(script=script, tools=["clock", "refund_payment", "list_payments"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert "refund_payment" not in recorder.names(0) and "refund_payment" not in recorder.names(1)
    [missing] = _calls(run)
    assert missing.status == CallStatus.INVALID
    told = json.dumps(recorder.turns[1]["messages"][-1])
    assert "refund_payment" not in told and "list_payments" not in told, told
