"""Review 2026-12-07 (r): the tenant a request names, on every entrance, after reviews h and k (``tenant_named``).

Seen by alice (acme's member), dana (a member of acme and globex), acme's operator and an administrator.

Findings:

1. A tenant named by ``?tenant=`` or ``X-Toolhub-Tenant`` that the caller is no member of was heard only by the
   writes that make something (calls, sagas, runs, agents) and a saga's URLs. Everywhere else it went unread and the
   request acted in the caller's own tenant: alice (acme) with ``X-Toolhub-Tenant: globex`` cancelled acme's held
   call and withdrew its approval request (``POST /calls/{id}/cancel/``), submitted an external call's result,
   cancelled and rolled back runs, and acme's operator approved and rejected acme's requests while naming globex
   (each 200/202, done). Fix: one check on every REST request, ``toolhub.api.named_tenant.NamesOneOfTheirTenants``
   (a default permission, and the agents views'): a tenant named by ``?tenant=`` or the header that is not the
   caller's is refused before the view runs (400, the text a write gives, ``toolhub.direct.not_a_member``; one for
   another's and a missing tenant), and the two naming different tenants are refused. Nothing changes.
   ``test_a_write_by_id_naming_a_tenant_not_theirs_changes_nothing``.
2. Reads ignored it the same way: alice listing calls, runs, approvals, sagas and agents, or reading one call or
   run, with ``X-Toolhub-Tenant: globex`` got acme's rows (200) as if globex had been heard; the run list's
   ``?tenant=globex`` answered an empty page and the tool listing heard ``?tenant=`` but not the header. Fix: the same
   check (400 for a tenant not theirs, as the tool listing already answered ``?tenant=``); and every list shows the
   rows of the tenant named, by ``?tenant=`` or the header alike (``NamedTenantFilter``, a default filter backend;
   an agent list keeps the global agents, which run in every tenant), the tool listing and exports reading the header
   too (``_tenants_for``). A row named by its id is read and acted on in its own tenant (a saga's id, per tenant, is
   looked up in the tenant named, as review k left it).
   ``test_a_read_naming_a_tenant_not_theirs_is_refused_not_answered_with_their_rows``,
   ``test_a_list_shows_the_tenant_the_header_names_as_the_query_does``.

Checked and holding:

- Malformed tenants (``test_holding_malformed_tenants_are_refused_or_named_nowhere``): ``?tenant=%00`` is refused by
  the middleware before any view (400, "holds a NUL character"), for an administrator too, so PostgreSQL never sees
  it; a body's NUL by the storable JSON parser; ``" "``, a 5,000-character slug and a non-ASCII slug are refused as a
  tenant not theirs (the text cut to 100 characters); a body's list or object is refused as no slug (calls, sagas:
  the serializer; runs: ``tenant_named``, review k); a body's number is read as its digits and refused as not
  theirs; an empty ``?tenant=`` or header names nothing (as an empty body tenant does for runs), so a member of one
  tenant is answered in it and a member of several is asked which.
- MCP (``toolhub.mcp_caller``) reads ``?tenant=`` and the header through ``tenant_named`` before a tool runs, and
  refuses a non-member's tenant (review h's tests); its status and cancel tools act by call id on a visible call.
- No other code reads a tenant from a request (grep of ``query_params``, ``request.GET``, ``headers`` in toolhub,
  agents_app, approvals): the admin's ``?tenant=`` is a changelist filter inside the viewer's boundary (reviews g and
  o, not tried again here). Webhooks are outbound only; tokens are issued by the admin and ``drf_create_token``,
  neither takes a tenant; subagents and a run's resumption take the parent run's tenant, never the client's.
- Administrators (everything in scope) naming a tenant that does not exist on a list are answered an empty page (no
  row is theirs to miss); their writes are refused by ``caller_principal``, which also asks the tenant exists.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.api.conftest import client_for
from tests.security_review.test_review_2026_12_07_h import dana  # noqa: F401 - a fixture, used by name
from tests.tenancy.conftest import AcmeData
from toolhub.models import CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Saga

pytestmark = pytest.mark.django_db(transaction=True)

NOT_GLOBEX = {"detail": "You are not a member of tenant 'globex'; give the slug of one of yours."}
EFFECT = {"tool": "record_effect", "arguments": {"note": "n"}}


def _client(user: User) -> Any:
    client = client_for(user)
    client.raise_request_exception = False
    return client


def _states(acme: AcmeData) -> list[str]:
    return [
        ToolCall.objects.get(pk=acme.approval.call_id).status,
        ApprovalRequest.objects.get(pk=acme.approval.pk).status,
        ToolCall.objects.get(pk=acme.external_call.pk).status,
        AgentRun.objects.get(pk=acme.waiting_run.pk).status,
        AgentRun.objects.get(pk=acme.external_run.pk).status,
        Saga.objects.get(pk=acme.saga.pk).status,
    ]


def test_a_write_by_id_naming_a_tenant_not_theirs_changes_nothing(
    acme: AcmeData, alice: User, acme_operator: User, other_tenant: Tenant
) -> None:
    """Found: alice (acme) posting a call's cancel, an external call's result, a run's cancel or rollback, and acme's
    operator approving or rejecting, with ``X-Toolhub-Tenant: globex`` (or ``?tenant=globex``), acted in acme:
    the tenant named was read by no write by id.
    Expect: 400 with the text a write naming a tenant not theirs gets, before anything is read or done: every
    call, request, run and saga as it was. Named nowhere, the same cancel is done.
    """
    before = _states(acme)
    posts = [
        (alice, f"/api/v1/calls/{acme.approval.call_id}/cancel/", {"reason": "x"}),
        (alice, f"/api/v1/calls/{acme.external_call.pk}/result/", {"result": {"found": True}}),
        (alice, f"/api/v1/runs/{acme.waiting_run.pk}/cancel/", {}),
        (alice, f"/api/v1/runs/{acme.ledger_run.pk}/rollback/", {}),
        (acme_operator, f"/api/v1/approvals/{acme.approval.pk}/approve/", {}),
        (acme_operator, f"/api/v1/approvals/{acme.approval.pk}/reject/", {"reason": "no"}),
    ]

    answers = [
        _client(user).post(path + query, body, format="json", **headers)
        for query, headers in (("?tenant=globex", {}), ("", {"HTTP_X_TOOLHUB_TENANT": "globex"}))
        for user, path, body in posts
    ]

    assert [answer.status_code for answer in answers] == [400] * 2 * len(posts), [a.content for a in answers]
    assert all(answer.json() == NOT_GLOBEX for answer in answers), [a.content for a in answers]
    assert _states(acme) == before
    assert not acme.saga.rollbacks.exists()
    cancelled = _client(alice).post(f"/api/v1/calls/{acme.approval.call_id}/cancel/", {"reason": "x"}, format="json")
    assert cancelled.status_code == 200, cancelled.content
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.CANCELLED


def test_a_read_naming_a_tenant_not_theirs_is_refused_not_answered_with_their_rows(
    acme: AcmeData, alice: User, acme_operator: User, other_tenant: Tenant
) -> None:
    """Found: alice (acme) reading the call, run, saga and agent lists, a call or a run, with
    ``X-Toolhub-Tenant: globex`` was answered acme's rows (200) as if globex had been heard; acme's operator got
    acme's approval requests; ``GET /runs/?tenant=globex`` answered an empty page where the tool listing answers the
    same ``?tenant=`` with 400.
    Expect: every read naming a tenant the caller is not in, by the header or ``?tenant=``, refused as a write is
    (400, one text), no row shown.
    """
    reads = [
        (alice, path)
        for path in (
            "/api/v1/calls/",
            "/api/v1/runs/",
            "/api/v1/sagas/",
            "/api/v1/tools/",
            f"/api/v1/calls/{acme.artifact_call.pk}/",
            f"/api/v1/runs/{acme.ledger_run.pk}/",
        )
    ] + [(acme_operator, "/api/v1/approvals/"), (acme_operator, f"/api/v1/approvals/{acme.approval.pk}/")]

    by_header = [_client(user).get(path, HTTP_X_TOOLHUB_TENANT="globex") for user, path in reads]
    by_query = [_client(user).get(f"{path}?tenant=globex") for user, path in reads]

    assert [answer.status_code for answer in by_header + by_query] == [400] * (2 * len(reads)), [
        (answer.status_code, answer.content[:100]) for answer in by_header + by_query
    ]
    assert all(answer.json() == NOT_GLOBEX for answer in by_header + by_query)
    assert _client(alice).get("/api/v1/runs/").json()["results"], "alice's own runs, named nowhere"


def test_a_list_shows_the_tenant_the_header_names_as_the_query_does(
    dana: User,  # noqa: F811 - the fixture imported above
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: dana (acme and globex) listing calls with ``X-Toolhub-Tenant: globex`` got acme's call beside globex's
    (the header unread by reads; calls had no tenant filter at all), the run list heard ``?tenant=`` only, and the
    tool listing too; the agent list showed acme's agent.
    Expect: a list shows the rows of the tenant named, by ``?tenant=`` or the header alike; the two naming different
    tenants are refused (400) as a write refuses them. Global agents are listed in every tenant.
    """
    client = _client(dana)
    with django_capture_on_commit_callbacks(execute=True):
        made = {
            slug: client.post("/api/v1/calls/", {**EFFECT, "tenant": slug}, format="json").json()["id"]
            for slug in ("acme", "globex")
        }

    by_header = client.get("/api/v1/calls/", HTTP_X_TOOLHUB_TENANT="globex")
    by_query = client.get("/api/v1/calls/?tenant=acme")
    both = client.get("/api/v1/calls/")
    differ = client.get("/api/v1/calls/?tenant=acme", HTTP_X_TOOLHUB_TENANT="globex")
    tools = client.get("/api/v1/tools/", HTTP_X_TOOLHUB_TENANT="globex")

    assert [row["id"] for row in by_header.json()["results"]] == [made["globex"]], by_header.content
    assert [row["id"] for row in by_query.json()["results"]] == [made["acme"]], by_query.content
    assert {row["id"] for row in both.json()["results"]} == set(made.values())
    assert differ.status_code == 400, differ.content
    assert differ.json() == {"detail": "?tenant= and the X-Toolhub-Tenant header name different tenants; name one."}
    assert tools.status_code == 200 and tools.json()["results"], tools.content
    for tenant in ("acme", "globex", None):
        agent_create(name=f"agent-{tenant}", tenant=tenant, script=[{"content": "Hello."}])
    agents = client.get("/api/v1/agents/", HTTP_X_TOOLHUB_TENANT="globex")
    assert sorted(row["name"] for row in agents.json()["results"]) == ["agent-None", "agent-globex"], agents.content


def test_holding_malformed_tenants_are_refused_or_named_nowhere(
    alice: User,
    dana: User,  # noqa: F811 - the fixture imported above
    superuser: User,
    other_tenant: Tenant,
) -> None:
    """Holding: a NUL is refused before any view (administrators too); blanks, a long or a non-ASCII slug are
    refused as not the caller's, the text cut short; a list or an object in a body is no slug; a number is its
    digits, not theirs; an empty ``?tenant=`` or header names nothing. Nothing recorded."""
    nul = [_client(user).get("/api/v1/runs/?tenant=%00") for user in (alice, superuser)]
    assert [answer.status_code for answer in nul] == [400, 400]
    assert all("NUL" in answer.json()["detail"] for answer in nul)

    long = "x" * 5000
    named = {" ": " ", long: long[:100], "ｇｌｏｂｅｘ": "ｇｌｏｂｅｘ", "globex": "globex"}
    for value, shown in named.items():
        body = _client(alice).post("/api/v1/calls/", {**EFFECT, "tenant": value}, format="json")
        header = _client(alice).post("/api/v1/calls/", EFFECT, format="json", HTTP_X_TOOLHUB_TENANT=value)
        # The body's is a slug field: a blank, too long or non-ASCII one is refused on its field.
        assert (body.status_code, header.status_code) == (400, 400), (value[:10], body.content, header.content)
        assert header.json()["detail"] == f"You are not a member of tenant {shown!r}; give the slug of one of yours."

    for value in (["acme"], {"slug": "acme"}):
        assert _client(alice).post("/api/v1/calls/", {**EFFECT, "tenant": value}, format="json").status_code == 400
        assert _client(alice).post("/api/v1/sagas/", {"tenant": value}, format="json").status_code == 400
    number = _client(alice).post("/api/v1/calls/", {**EFFECT, "tenant": 5}, format="json")
    assert number.status_code == 400 and number.json()["detail"].startswith("You are not a member of tenant '5'")
    assert not ToolCall.objects.exists()

    own = _client(alice).post("/api/v1/calls/?tenant=", EFFECT, format="json", HTTP_X_TOOLHUB_TENANT="")
    several = _client(dana).post("/api/v1/calls/?tenant=", EFFECT, format="json")
    assert own.status_code in (200, 202) and ToolCall.objects.get().tenant == "acme", own.content
    assert several.status_code == 400 and "several tenants" in several.json()["detail"]
    assert ToolCall.objects.exclude(status=CallStatus.INVALID).count() == 1
    assert AgentRun.objects.filter(status=RunStatus.RUNNING).count() == 0
