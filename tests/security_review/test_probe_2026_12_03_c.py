"""Adversarial probe (2026-12-03, third pass) of surfaces the first two probes and the tenancy suite left out.

As a plain member of acme (carol, beside alice), a member of two tenants, acme's auditor, a globex user holding
``toolhub.change_toolcall``, an MCP client and an agent run of acme, try to reach someone else's calls, results
and runs through the newer doors: idempotency keys (reused by a colleague, across tenants, after leaving a
tenant), the external-result endpoint (a colleague's call, a call held for approval, a call already settled),
artifact downloads with mixed ids, a colleague's run retried or rolled back, a run's context carrying reserved
keys, a subagent naming an agent that exists only in globex, the blackboard tools called from outside a run,
MCP's status tool and tenant header, and what the agents and runs API tell a member about tools she may not use.

Tests named ``test_fixed_*`` are leaks this probe found (written first as strict expected failures asserting
the secure behaviour), fixed the same day. The others passed when written and stay as regression tests.
"""

from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from django.contrib.auth.models import Group, Permission, User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.helpers import RequestCall
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi is a fixture
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, database_state, make_user, random_uuid
from tests.testapp.models import SideEffect
from tests.testapp.tools import ask_researcher
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, TenantMembership, ToolCall
from toolhub.tools.context_types import register_context_type
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


def effect(note: str) -> dict[str, Any]:
    return {"tool": "record_effect", "arguments": {"note": note}}


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-auditor-c", tenant=tenant, staff=True, groups=(roles["auditors"],))


# --- idempotency keys ----------------------------------------------------------------------------------------


def test_a_colleague_reusing_alices_idempotency_key_gets_neither_her_call_nor_a_conflict_naming_it(
    alice: User, carol: User
) -> None:
    """carol (acme, no role) sends alice's ``Idempotency-Key`` with another request, then with alice's very request.

    Tried: the key alone (another body: a 409 would prove the key exists and name alice's call in ``call``), then
    the same body (a replay would hand carol alice's call and result). Keys are per user and tenant: carol gets
    calls of her own, and her own key's conflict names only her own call.
    """
    mine = client_for(alice).post(
        "/api/v1/calls/", effect("alice-secret-note"), format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert mine.status_code == 200, mine.content
    alice_call = mine.json()["id"]
    carol_client = client_for(carol)

    other = carol_client.post("/api/v1/calls/", effect("carol"), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    same = carol_client.post("/api/v1/calls/", effect("alice-secret-note"), format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    conflict = carol_client.post(
        "/api/v1/calls/", effect("alice-secret-note"), format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )

    assert other.status_code == 200 and other.json()["replayed"] is False
    assert "Idempotent-Replayed" not in other.headers
    assert other.json()["id"] != alice_call and ToolCall.objects.get(pk=other.json()["id"]).user_id == carol.pk
    assert same.status_code == 200 and same.json()["id"] != alice_call
    assert conflict.status_code == 409 and conflict.json()["call"] == other.json()["id"]
    for answer in (other, same, conflict):
        assert alice_call not in answer.content.decode()
    assert sorted(SideEffect.objects.values_list("note", flat=True)) == [
        "alice-secret-note",
        "alice-secret-note",
        "carol",
    ]


def test_one_idempotency_key_in_two_tenants_makes_two_calls_each_replayed_only_in_its_own(
    tenant: Tenant, other_tenant: Tenant
) -> None:
    """A member of acme and globex sends one key in both tenants (same body but the tenant).

    A replay across tenants would file globex's request under acme's call (or hand acme's result to globex).
    """
    dual = make_user("dual", tenant=tenant)
    TenantMembership.objects.create(user=dual, tenant=other_tenant)
    client = client_for(dual)

    def send(slug: str) -> Any:
        return client.post(
            "/api/v1/calls/", {**effect("dual"), "tenant": slug}, format="json", HTTP_IDEMPOTENCY_KEY="shared"
        )

    acme_call, globex_call, acme_again = send("acme"), send("globex"), send("acme")

    assert (acme_call.status_code, globex_call.status_code) == (200, 200)
    assert globex_call.json()["replayed"] is False and globex_call.json()["id"] != acme_call.json()["id"]
    assert ToolCall.objects.get(pk=globex_call.json()["id"]).tenant == "globex"
    assert acme_again.json()["replayed"] is True and acme_again.json()["id"] == acme_call.json()["id"]


def test_a_key_replayed_after_leaving_the_tenant_does_not_return_the_tenants_call(alice: User) -> None:
    """alice makes a call with a key in acme, leaves acme, and sends the same request with the same key.

    A replay would hand someone no longer in acme the result of an acme call (out of her reach since she left).
    """
    first = client_for(alice).post("/api/v1/calls/", effect("acme-only"), format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert first.status_code == 200
    TenantMembership.objects.filter(user=alice).delete()

    again = client_for(User.objects.get(pk=alice.pk)).post(
        "/api/v1/calls/", effect("acme-only"), format="json", HTTP_IDEMPOTENCY_KEY="k"
    )

    assert first.json()["id"] not in again.content.decode()
    assert again.json().get("replayed") is not True
    assert client_for(User.objects.get(pk=alice.pk)).get(f"/api/v1/calls/{first.json()['id']}/").status_code == 404


# --- external results ----------------------------------------------------------------------------------------


def test_a_colleague_cannot_supply_the_result_of_alices_external_call(acme: AcmeData, carol: User) -> None:
    """carol (acme, no role) posts a result for alice's CRM lookup (it awaits one): answered like a missing call."""
    before = database_state()
    body = {"result": {"name": "Mallory"}}

    theirs = client_for(carol).post(f"/api/v1/calls/{acme.external_call.id}/result/", body, format="json")
    missing = client_for(carol).post(f"/api/v1/calls/{random_uuid()}/result/", body, format="json")

    assert theirs.status_code == 404 and theirs.content == missing.content
    assert database_state() == before
    assert ToolCall.objects.get(pk=acme.external_call.pk).status == CallStatus.AWAITING_RESULT


def test_an_auditor_who_sees_the_call_may_not_supply_its_result(acme: AcmeData, acme_auditor: User) -> None:
    """acme's auditor reads alice's external call but holds no ``change_toolcall``: 403, the call still waits."""
    client = client_for(acme_auditor)
    assert client.get(f"/api/v1/calls/{acme.external_call.id}/").status_code == 200
    before = database_state()

    refused = client.post(f"/api/v1/calls/{acme.external_call.id}/result/", {"result": {"x": 1}}, format="json")

    assert refused.status_code == 403
    assert database_state() == before


def test_the_change_toolcall_permission_in_globex_reaches_no_call_of_acme(acme: AcmeData, other_tenant: Tenant) -> None:
    """A plain globex member holding ``toolhub.change_toolcall`` (supplies results tenant-wide) tries acme's."""
    holder = make_user("globex-connector", tenant=other_tenant, permissions=("toolhub.change_toolcall",))
    before = database_state()

    refused = client_for(holder).post(
        f"/api/v1/calls/{acme.external_call.id}/result/", {"result": {"x": 1}}, format="json"
    )
    missing = client_for(holder).post(f"/api/v1/calls/{random_uuid()}/result/", {"result": {"x": 1}}, format="json")

    assert refused.status_code == 404 and refused.content == missing.content
    assert database_state() == before


def test_the_requester_cannot_settle_her_own_call_held_for_approval_or_already_settled(
    acme: AcmeData, alice: User
) -> None:
    """alice posts a "result" for her own create_order call held for an operator, and for her settled export.

    A result accepted for the held call would bypass the approval (the run would read the order as placed).
    """
    held = ToolCall.objects.get(run_id=acme.waiting_run.id)
    assert held.status == CallStatus.PENDING_APPROVAL
    client = client_for(alice)
    before = database_state()

    on_held = client.post(f"/api/v1/calls/{held.id}/result/", {"result": {"order": "forged"}}, format="json")
    on_settled = client.post(
        f"/api/v1/calls/{acme.artifact_call.id}/result/", {"result": {"forged": True}}, format="json"
    )

    assert (on_held.status_code, on_settled.status_code) == (409, 409)
    assert database_state() == before
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.PENDING
    assert ToolCall.objects.get(pk=acme.artifact_call.pk).result != {"forged": True}


# --- artifacts -------------------------------------------------------------------------------------------------


def test_artifact_ids_mixed_across_calls_and_users_download_nothing(
    acme: AcmeData, carol: User, request_call: RequestCall
) -> None:
    """carol's artifact id under alice's call, alice's under carol's, and alice's whole address from carol's client."""
    carols = request_call("export_file", {"name": "carol"}, carol, tenant="acme")
    carols_artifact = carols.artifacts.get()
    alice_client, carol_client = client_for(User.objects.get(pk=acme.artifact_call.user_id)), client_for(carol)
    missing = carol_client.get(f"/api/v1/calls/{random_uuid()}/artifacts/987654321/")

    answers = [
        carol_client.get(f"/api/v1/calls/{acme.artifact_call.id}/artifacts/{acme.artifact.pk}/"),
        carol_client.get(f"/api/v1/calls/{carols.id}/artifacts/{acme.artifact.pk}/"),
        alice_client.get(f"/api/v1/calls/{acme.artifact_call.id}/artifacts/{carols_artifact.pk}/"),
    ]

    assert [a.status_code for a in answers] == [404, 404, 404]
    assert all(a.content == missing.content for a in answers)
    assert (
        carol_client.get(f"/api/v1/calls/{carols.id}/artifacts/{carols_artifact.pk}/").content == b"acme report carol"
    )


# --- runs: a colleague's run, the run's context ----------------------------------------------------------------


def test_a_plain_member_cannot_retry_read_or_roll_back_a_colleagues_run(acme: AcmeData, carol: User) -> None:
    """carol (acme, no role) asks for the rollback of alice's debit run, its saga, and a retry of it."""
    client = client_for(carol)
    before = database_state()
    run, missing = acme.ledger_run.id, random_uuid()

    answers = {
        "rollback": (client.post(f"/api/v1/runs/{run}/rollback/"), client.post(f"/api/v1/runs/{missing}/rollback/")),
        "saga": (client.get(f"/api/v1/runs/{run}/rollback/"), client.get(f"/api/v1/runs/{missing}/rollback/")),
        "retry": (client.post(f"/api/v1/runs/{run}/retry/"), client.post(f"/api/v1/runs/{missing}/retry/")),
        "read": (client.get(f"/api/v1/runs/{run}/"), client.get(f"/api/v1/runs/{missing}/")),
    }

    for what, (theirs, absent) in answers.items():
        assert theirs.status_code == 404, what
        assert theirs.content == absent.content, what
    assert database_state() == before


@pytest.mark.parametrize("key", ["user", "user_id", "run_id", "call_id", "agent", "saga_id", "idempotency_key"])
def test_a_run_context_cannot_carry_a_reserved_key(key: str, alice: User) -> None:
    """alice starts a run whose context sets a key toolhub sets from the boundary (e.g. ``user``: someone else)."""
    agent_create(name="probe-c-plain", provider="scripted", script=[{"content": "hi"}], tools=[])

    answer = client_for(alice).post(
        "/api/v1/runs/", {"agent": "probe-c-plain", "input": "go", "context": {key: "1"}}, format="json"
    )

    assert answer.status_code == 400, answer.content
    assert key in answer.content.decode()
    assert not AgentRun.objects.exists()


@register_context_type(key="probe_identity")
@dataclass(frozen=True)
class ProbeIdentity:
    """Who a tool acts for, as a typed context object: built by the server, trusted by tools."""

    user_id: str


def test_fixed_a_run_context_cannot_carry_a_typed_context_objects_key(alice: User, settings: Any) -> None:
    """alice starts a run whose context names a typed context object's key (who its tools act for).

    Found by this probe: a run's context took any key but the reserved ones, so a client chose what a tool
    marked ``Annotated[ProbeIdentity, FromContext]`` received, where a direct call refuses any key off
    ``CLIENT_CONTEXT_KEYS``. Fixed: such a key is refused (400, nothing created) unless operators list it.
    """
    agent_create(name="probe-c-typed", provider="scripted", script=[{"content": "hi"}], tools=[])
    body = {"agent": "probe-c-typed", "input": "go", "context": {"probe_identity": {"user_id": "carol"}}}

    refused = client_for(alice).post("/api/v1/runs/", body, format="json")

    assert refused.status_code == 400, refused.content
    assert "'probe_identity'" in refused.json()["context"][0]
    assert not AgentRun.objects.exists()
    settings.TOOLHUB = {**settings.TOOLHUB, "CLIENT_CONTEXT_KEYS": ["probe_identity"]}
    assert client_for(alice).post("/api/v1/runs/", body, format="json").status_code == 201


@pytest.mark.parametrize(
    "context",
    [{"user_context": {"user_id": "carol"}}, {"tenant_slug": "globex"}, {"correlation_id": "x" * 501}],
    ids=["typed-context-key", "unlisted-key", "oversized-value"],
)
def test_a_direct_calls_context_takes_only_short_values_of_the_allow_list(context: dict[str, Any], alice: User) -> None:
    """alice's REST call carries a typed context object's key (``user_context``: who she claims to be), a key off
    the allow list, and an allowed key with a 501-character value: each refused with 400, nothing recorded."""
    answer = client_for(alice).post("/api/v1/calls/", {**effect("ctx"), "context": context}, format="json")

    assert answer.status_code == 400, answer.content
    assert not ToolCall.objects.exists() and not SideEffect.objects.exists()


# --- subagents and the blackboard ------------------------------------------------------------------------------


def test_a_subagent_naming_an_agent_that_exists_only_in_globex_starts_nothing(
    alice: User, other_tenant: Tenant
) -> None:
    """acme's run calls ``ask_researcher`` while the only agent named ``researcher`` is globex's.

    A lookup by name across tenants would start globex's agent (its prompt, its tools) for alice, in globex.
    """
    agent_create(
        name="researcher", tenant="globex", provider="scripted", script=[{"content": "GLOBEX-ANSWER"}], tools=[]
    )
    with registry.temporarily(ask_researcher):
        parent_agent = agent_create(
            name="probe-c-parent",
            tenant="acme",
            provider="scripted",
            tools=["ask_researcher"],
            script=[
                {"tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
                {"content": "Parent got: {last_tool_result}"},
            ],
        )
        parent = run_start(agent=parent_agent, user=alice, input="go")
        parent.refresh_from_db()

    [call] = ToolCall.objects.filter(run_id=parent.id)
    assert call.status == CallStatus.FAILED and "not available" in call.error
    assert not AgentRun.objects.filter(parent_run=parent).exists()
    assert not AgentRun.objects.filter(tenant="globex").exists()
    assert "GLOBEX-ANSWER" not in str(parent.messages) and "GLOBEX-ANSWER" not in parent.output


def test_the_blackboard_tools_called_from_outside_a_run_read_no_run(acme: AcmeData, carol: User) -> None:
    """carol calls ``blackboard_list`` over REST, naming alice's run in the context, then without a run at all."""
    client = client_for(carol)
    named = client.post(
        "/api/v1/calls/",
        {"tool": "blackboard_list", "arguments": {}, "context": {"run_id": str(acme.ledger_run.id)}},
        format="json",
    )
    bare = client.post("/api/v1/calls/", {"tool": "blackboard_list", "arguments": {}}, format="json")

    assert named.status_code == 400 and "run_id" in named.json()["detail"]
    assert bare.status_code == 200 and bare.json()["status"] == CallStatus.FAILED
    assert "only inside an agent run" in bare.json()["error"]
    assert str(acme.ledger_run.id) not in bare.content.decode()


# --- MCP ---------------------------------------------------------------------------------------------------------


def test_mcp_status_of_a_colleagues_call_and_another_tenants_header_answer_like_nothing(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    carol: User,
    other_tenant: Tenant,
) -> None:
    """Over the official SDK client, carol asks ``toolhub_call_status`` of alice's call (same tenant), and alice
    sends ``X-Toolhub-Tenant: globex`` (not hers) on ``tools/list`` and ``tools/call``."""
    alice_call = client_for(alice).post("/api/v1/calls/", effect("alice-mcp-note"), format="json").json()["id"]
    missing = random_uuid()

    async def status(client: Client, call_id: str) -> Any:
        return await client.call_tool("toolhub_call_status", {"call_id": call_id})

    theirs = with_client(live_asgi, token(carol), lambda client: status(client, alice_call))
    absent = with_client(live_asgi, token(carol), lambda client: status(client, missing))

    assert theirs.is_error is True and "alice-mcp-note" not in str(theirs)
    assert theirs.content[0].text.replace(alice_call, missing) == absent.content[0].text

    async def as_globex(client: Client) -> list[str]:
        refused = []
        for attempt in (client.list_tools(), client.call_tool("record_effect", {"note": "in globex"})):
            try:
                await attempt
            except MCPError as error:
                refused.append(str(error))
        return refused

    refused = _with_headers(
        live_asgi, {"Authorization": f"Bearer {token(alice)}", "X-Toolhub-Tenant": "globex"}, as_globex
    )
    assert len(refused) == 2 and all("not a member of tenant 'globex'" in text for text in refused)
    assert not ToolCall.objects.filter(tenant="globex").exists()
    assert SideEffect.objects.filter(note="in globex").count() == 0


def _with_headers(base: str, headers: dict[str, str], body: Any) -> Any:
    """Like ``tests.mcp.conftest.with_client``, with any headers (here a tenant header)."""

    async def main() -> Any:
        async with create_mcp_http_client(headers=headers) as http:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
                return await body(client)

    return anyio.run(main)


# --- what the agents and runs API tell a member about tools she may not use -------------------------------------


def _hidden_calculate(alice: User) -> Agent:
    """alice is denied ``calculate``; a global agent lists it and its script calls it."""
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="calculate", user=alice)
    return agent_create(
        name="probe-c-calc",
        provider="scripted",
        tools=["calculate"],
        script=[
            {"tool_calls": [{"name": "calculate", "arguments": {"a": 2, "op": "*", "b": 21}}]},
            {"content": "done"},
        ],
    )


def test_the_run_page_reads_a_denied_call_of_a_hidden_tool_as_unknown(alice: User) -> None:
    """Baseline for the two leaks below: ``GET /api/v1/runs/{id}/`` shows alice the answer the model got."""
    _hidden_calculate(alice)
    started = client_for(alice).post("/api/v1/runs/", {"agent": "probe-c-calc", "input": "go"}, format="json")
    assert started.status_code == 201, started.content

    [row] = client_for(alice).get(f"/api/v1/runs/{started.json()['id']}/").json()["tool_calls"]

    assert (row["status"], row["error"].split(".")[0]) == ("invalid", "Unknown tool 'calculate'")


def test_fixed_the_answer_to_starting_a_run_shows_a_denied_call_of_a_tool_its_user_may_not_see(alice: User) -> None:
    """alice starts (over the API) a run whose model calls ``calculate``, a tool denied to her; the scripted model
    runs in the request (eager), so the 201 answer already lists the call. It should read as GET does: unknown."""
    _hidden_calculate(alice)

    started = client_for(alice).post("/api/v1/runs/", {"agent": "probe-c-calc", "input": "go"}, format="json")

    assert started.status_code == 201, started.content
    [row] = started.json()["tool_calls"]
    assert row["status"] == "invalid"
    assert "denied" not in row["error"]


def test_fixed_the_answer_to_retrying_a_run_shows_a_denied_call_of_a_tool_its_user_may_not_see(alice: User) -> None:
    """alice's run called ``calculate`` (denied to her) and later failed retryably; she retries it over the API."""
    agent = _hidden_calculate(alice)
    run = run_start(agent=agent, user=alice, input="go")
    assert ToolCall.objects.get(run_id=run.id).status == CallStatus.DENIED
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, retryable=True, error="model endpoint down")

    retried = client_for(alice).post(f"/api/v1/runs/{run.id}/retry/")

    assert retried.status_code == 200, retried.content
    [row] = retried.json()["tool_calls"]
    assert row["status"] == "invalid"
    assert "denied" not in row["error"]


def test_fixed_an_agents_tool_list_names_tools_its_reader_may_not_use(alice: User, operator: User) -> None:
    """A global agent (platform-made) lists ``calculate`` and ``debit``; alice is denied ``debit``.

    Her catalogue (``GET /api/v1/tools/``) leaves ``debit`` out and a call of it answers 404 like a missing tool;
    the agent list and detail should show her the agent's tools she may use, not the others.
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="debit", user=alice)
    agent = agent_create(name="probe-c-ledger", provider="scripted", tools=["calculate", "debit"], script=[])
    client = client_for(alice)
    catalogue = {tool["name"] for tool in client.get("/api/v1/tools/?page_size=500").json()["results"]}
    assert "calculate" in catalogue and "debit" not in catalogue
    assert client.post("/api/v1/calls/", {"tool": "debit", "arguments": {}}, format="json").status_code == 404

    [listed] = client.get("/api/v1/agents/?name=probe-c-ledger").json()["results"]
    detail = client.get(f"/api/v1/agents/{agent.pk}/").json()

    assert listed["tools"] == ["calculate"]
    assert detail["tools"] == ["calculate"]
    # the catalogue's roles (operators, auditors, developers) read the agent whole
    assert client_for(operator).get(f"/api/v1/agents/{agent.pk}/").json()["tools"] == ["calculate", "debit"]


def test_the_agent_lists_and_details_of_globex_show_acme_nothing(alice: User, other_tenant: Tenant) -> None:
    """alice lists agents and reads, starts and patches globex's agent by id and by name: like a missing one."""
    theirs = agent_create(name="probe-c-globex", tenant="globex", provider="scripted", script=[], tools=[])
    client = client_for(alice)

    listed = [a["name"] for a in client.get("/api/v1/agents/?page_size=100").json()["results"]]
    detail, absent = client.get(f"/api/v1/agents/{theirs.pk}/"), client.get("/api/v1/agents/987654/")
    by_id = client.post("/api/v1/runs/", {"agent_id": theirs.pk, "input": "go"}, format="json")
    by_name = client.post("/api/v1/runs/", {"agent": "probe-c-globex", "input": "go"}, format="json")

    assert "probe-c-globex" not in listed
    assert detail.status_code == 404 and detail.content == absent.content
    assert (by_id.status_code, by_name.status_code) == (400, 400)
    assert "globex" not in by_id.content.decode().replace("probe-c-globex", "")
    assert not AgentRun.objects.exists()
    # a developer's permission in acme changes nothing about globex's agent
    developer = make_user("acme-dev-c", tenant=Tenant.objects.get(slug="acme"), staff=True)
    developer.user_permissions.add(Permission.objects.get(codename="change_agent"))
    patched = client_for(developer).patch(f"/api/v1/agents/{theirs.pk}/", {"system_prompt": "pwned"}, format="json")
    assert patched.status_code == 404
    assert Agent.objects.get(pk=theirs.pk).system_prompt == ""
