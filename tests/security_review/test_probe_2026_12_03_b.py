"""Adversarial probe (2026-12-03, second pass) of surfaces the first probe and the tenancy suite left out.

As someone of tenant acme (a plain member, an auditor, an operator, a developer, an API client) try to
learn something about tenant globex (its rows, names, counts, the existence of its rows) or to act on
rows one may not act on: direct sagas and their ids (joining one, rolling one back, a failed step
under its id), the sagas API and pages across tenants, the admin's searches, orderings and filter
choices, the ``tenant`` parameter of every POST that takes one, crafted pagination cursors, the
OpenAPI schema, webhook deliveries and approval pages of a tool with sensitive arguments.

Tests named ``test_fixed_*`` are leaks this probe found (written first as strict expected failures asserting
the secure behaviour), fixed the same day; each docstring says what leaked and how it was fixed. The others
passed when written and stay as regression tests.
"""

import base64
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from approvals.forms import shown_fields_version
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalRule, ApprovalStatus
from demo.models import Account
from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, database_state, make_user
from tests.testapp.models import SideEffect
from toolhub import Param, tool
from toolhub.admin_marks import marks_field, row_mark
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Saga
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_UUID = "00000000-0000-0000-0000-000000000000"


def step(client: APIClient, label: str, saga_id: str, tool: str = "saga_step") -> Any:
    arguments = {"label": label} if tool == "saga_step" else {"reason": label}
    return client.post("/api/v1/calls/", {"tool": tool, "arguments": arguments, "saga_id": saga_id}, format="json")


def undone() -> list[str]:
    """The labels of the saga steps that were compensated (``undo_saga_step`` side effects)."""
    return sorted(SideEffect.objects.filter(tool="undo_saga_step").values_list("note", flat=True))


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    """acme's auditor: reads every row of acme, does nothing (README, "Tenants and roles")."""
    return make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],))


@pytest.fixture
def alices_trip(alice: User) -> str:
    """alice's direct saga ``trip-1`` with two completed compensable steps (flight, hotel)."""
    client = client_for(alice)
    assert client.post("/api/v1/sagas/", {"saga_id": "trip-1"}, format="json").status_code == 201
    for label in ("flight", "hotel"):
        assert step(client, label, "trip-1").status_code == 200
    assert Saga.objects.get(key="trip-1").compensations.count() == 2
    return "trip-1"


# --- direct sagas: joining a saga one did not open -----------------------------------------------------------


def test_fixed_a_member_joins_a_colleagues_direct_saga_by_its_name_and_rolls_it_back(
    alice: User, carol: User, alices_trip: str
) -> None:
    """carol (acme, no role) guesses alice's saga id (client-chosen, e.g. ``trip-1``) and sends a step under it.

    Before: carol cannot read alice's saga (404). Tried: ``POST /api/v1/calls/ {"tool": "saga_step",
    "saga_id": "trip-1"}`` as carol, then ``GET /api/v1/sagas/trip-1/`` and ``POST /api/v1/sagas/trip-1/rollback/``.
    Found: the step is accepted into alice's saga; carol then reads the saga (alice's steps, their call ids)
    and her rollback undoes alice's flight and hotel. Fixed (``sagas.selectors.saga_id_unavailable``): a call
    may carry an unused saga id or one of a direct saga its caller owns; anything else gets the same 400 as
    another tenant's id, and nothing is recorded.
    """
    carol_client = client_for(carol)
    assert carol_client.get(f"/api/v1/sagas/{alices_trip}/").status_code == 404

    refused = step(carol_client, "carols-step", alices_trip)
    assert refused.status_code == 400 and "not available" in refused.json()["detail"], refused.content
    assert not ToolCall.objects.filter(user=carol).exists()
    read = carol_client.get(f"/api/v1/sagas/{alices_trip}/")
    rolled = carol_client.post(f"/api/v1/sagas/{alices_trip}/rollback/")

    assert read.status_code == 404, read.content
    assert rolled.status_code == 404, rolled.content
    assert "flight" not in undone() and "hotel" not in undone()


def test_fixed_a_members_failing_call_under_a_colleagues_saga_id_rolls_the_colleagues_steps_back(
    alice: User, carol: User, alices_trip: str
) -> None:
    """carol sends a failing call (``always_fails``) under alice's saga id: that rollback is not hers to ask for.

    Tried: ``POST /api/v1/calls/ {"tool": "always_fails", "arguments": {"reason": "x"}, "saga_id": "trip-1"}`` as carol.
    Found: the failure counts as a failed step of alice's saga, which rolls alice's flight and hotel back.
    Fixed: the call is refused before it is recorded (the saga id is not hers).
    """
    step(client_for(carol), "boom", alices_trip, tool="always_fails")

    assert undone() == []
    assert Saga.objects.get(key=alices_trip).status == "open"


def test_fixed_an_auditor_rolls_a_run_back_by_a_failing_call_carrying_the_runs_id_as_saga_id(
    acme: AcmeData, acme_auditor: User
) -> None:
    """acme's auditor, refused ``POST /api/v1/runs/{id}/rollback/`` (403), tries the saga id instead.

    Tried: ``POST /api/v1/calls/ {"tool": "always_fails", "arguments": {"reason": "x"}, "saga_id": "<alice's run
    id>"}`` as the auditor (who reads every acme run id). Found: the failed call is taken for a failed step of the
    run's saga, whose debit is compensated: 100 go back to ACC-ACME, an action the auditor may not take.
    Fixed: a run's saga key (a run that made calls) is never a direct call's saga id.
    """
    client = client_for(acme_auditor)
    run_id = str(acme.ledger_run.id)
    assert client.post(f"/api/v1/runs/{run_id}/rollback/").status_code == 403
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("900")

    step(client, "boom", run_id, tool="always_fails")

    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("900")
    assert acme.saga.compensations.get().status == "recorded"


def test_a_runs_id_is_never_a_direct_calls_saga_id_even_before_the_run_made_a_call(alice: User) -> None:
    """A run's id is its saga's key: carried by a direct call before the run records a step, it would file the
    run's steps into the caller's saga (``locked_saga``), which the caller could then roll back."""
    from agents_app.models import Agent
    from agents_app.services import run_start

    agent = Agent.objects.create(name="quiet", script=[{"content": "nothing to do"}], tools=[])
    run = run_start(agent=agent, user=alice, input="go")
    assert not ToolCall.objects.filter(run_id=run.id).exists()

    refused = step(client_for(alice), "squat", str(run.id))

    assert refused.status_code == 400 and "not available" in refused.json()["detail"], refused.content
    assert not ToolCall.objects.filter(saga_id=str(run.id)).exists()


def test_fixed_an_auditor_refused_a_sagas_rollback_joins_it_and_rolls_it_back(
    alices_trip: str, acme_auditor: User
) -> None:
    """acme's auditor sees alice's saga and is refused its rollback; one harmless step under its id makes it theirs.

    Tried: ``POST /api/v1/sagas/trip-1/rollback/`` (403), then ``POST /api/v1/calls/`` with ``saga_id: "trip-1"``
    and the rollback again. Found: 202, alice's flight and hotel undone. Fixed: the step is refused, and "own"
    means the saga's owner (who opened it, else who made its first call), not anyone whose call carries its id.
    """
    client = client_for(acme_auditor)
    assert client.post(f"/api/v1/sagas/{alices_trip}/rollback/").status_code == 403

    step(client, "auditors-step", alices_trip)
    again = client.post(f"/api/v1/sagas/{alices_trip}/rollback/")

    assert again.status_code == 403, again.content
    assert "flight" not in undone() and "hotel" not in undone()


# --- direct sagas across tenants -------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["globex_operator", "globex_auditor", "globex_user"])
def test_globex_reads_and_rolls_back_none_of_acmes_direct_sagas_answered_like_missing_ones(
    who: str, alices_trip: str, request: pytest.FixtureRequest
) -> None:
    """globex's people ask the sagas API and the saga pages for alice's ``trip-1``, and for a missing saga.

    Tried: ``GET /api/v1/sagas/``, ``GET /api/v1/sagas/trip-1/``, ``POST /api/v1/sagas/trip-1/rollback/`` (and the
    same for ``no-such-trip``), the saga and compensation changelists searched for ``trip`` (staff).
    """
    user = request.getfixturevalue(who)
    client = client_for(user)
    before = database_state()

    assert client.get("/api/v1/sagas/").json()["results"] == []
    for method in ("get", "post"):
        path = "/api/v1/sagas/{}/" if method == "get" else "/api/v1/sagas/{}/rollback/"
        theirs = getattr(client, method)(path.format(alices_trip))
        missing = getattr(client, method)(path.format("no-such-trip"))
        assert theirs.status_code == missing.status_code == 404, (method, theirs.content)
        assert theirs.content == missing.content
    assert database_state() == before and undone() == []
    if user.is_staff:
        page = console(user)
        for url in ("/admin/sagas/saga/?q=trip", "/admin/sagas/compensation/?q=trip"):
            response = page.get(url)
            assert response.status_code == 200
            assert list(response.context["cl"].result_list) == [], url


def test_fixed_a_saga_id_taken_in_globex_tells_acme_nothing_and_is_acmes_own_there(
    alice: User, other_tenant: Tenant
) -> None:
    """Found (documented then as a residual risk): a saga id was unique across tenants, so acme learned that
    *some* tenant used it (409 and 400 where an unused id was accepted). Fixed: saga ids are per tenant
    (``saga_key_per_tenant``); another tenant's saga of the same name is neither read nor consulted.

    Tried: globex opens ``order-7`` and makes a step; alice opens ``order-7`` and ``order-8`` (unused anywhere),
    then sends a step under each, and rolls ``order-7`` back.
    """
    bob = make_user("globex-bob", tenant=other_tenant)
    assert client_for(bob).post("/api/v1/sagas/", {"saga_id": "order-7"}, format="json").status_code == 201
    assert step(client_for(bob), "globex-step", "order-7").status_code == 200
    client = client_for(alice)

    answers = {
        key: (
            client.post("/api/v1/sagas/", {"saga_id": key}, format="json").status_code,
            step(client, f"acme-{key}", key).status_code,
        )
        for key in ("order-7", "order-8")
    }
    rolled = client.post("/api/v1/sagas/order-7/rollback/")

    # then a name globex uses is answered as an unused one, and alice's saga of that name is hers alone
    assert answers == {"order-7": (201, 200), "order-8": (201, 200)}
    assert rolled.status_code == 202, rolled.content
    assert undone() == ["acme-order-7"]
    assert dict(Saga.objects.filter(key="order-7").values_list("tenant", "status")) == {
        "acme": "compensated",
        "globex": "open",
    }
    seen = client.get("/api/v1/sagas/order-7/").json()
    assert seen["tenant"] == "acme" and "globex" not in str(seen) and "bob" not in str(seen)


# --- the admin: filter choices, searches and orderings ------------------------------------------------------


def _event_type_choices(client: Client) -> list[str]:
    response = client.get("/admin/toolhub/auditevent/")
    assert response.status_code == 200
    specs = [s for s in response.context["cl"].filter_specs if getattr(s, "parameter_name", "") == "event_type"]
    # a filter with no choice is not shown at all
    return [str(value) for spec in specs for value, _ in spec.lookup_choices]


def test_fixed_the_event_type_filter_offers_globex_staff_no_event_types_of_acmes_activity(
    alice: User, globex_auditor: User, acme_operator: User
) -> None:
    """globex's auditor watches the event-type choices of the audit console while acme works.

    Tried: read the choices, let acme open a saga, run steps and approve a held call, read them again.
    Found: new choices appear (``saga.opened``, ``approval.approve`` ...) though globex's auditor sees no event:
    globex learns what kind of activity acme (or any other tenant) had, e.g. that someone's approval was edited,
    escalated or that calls were exported. Fixed: tenant-scoped viewers type the event type
    (``EventTypeInputFilter``); the choices from the whole trail are for those who cross tenants.
    """
    page = console(globex_auditor)
    before = _event_type_choices(page)
    client = client_for(alice)
    client.post("/api/v1/sagas/", {"saga_id": "trip-9"}, format="json")
    step(client, "flight", "trip-9")
    held = client.post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "n"}}, format="json")
    assert held.status_code == 202, held.content
    approved = client_for(acme_operator).post(f"/api/v1/approvals/{held.json()['approval_id']}/approve/", {})
    assert approved.status_code == 200, approved.content
    assert not AuditEvent.objects.filter(tenant="globex").exists()

    after = _event_type_choices(page)

    assert after == before, sorted(set(after) - set(before))
    # the typed filter finds the type within one's tenants only
    typed = "/admin/toolhub/auditevent/?event_type=approval.approve"
    assert page.get(typed).context["cl"].result_count == 0
    assert console(acme_operator).get(typed).context["cl"].result_count == 1


def _acme_markers(acme: AcmeData, url: str = "") -> list[str]:
    """What of acme's must not show to globex; the fixture's agents are global (shown to all), acme's own is not."""
    markers = [">alice<", "user:alice", "alice@", "acme-private-agent", str(acme.ledger_run.id)]
    markers += [str(acme.ledger_run.id)[:8], str(acme.artifact_call.id)[:8]]
    if "agent/" not in url and "agents/" not in url:
        markers += ["acme-ledger", "acme-orders", "acme-crm", "ACC-ACME"]
    return markers


@pytest.fixture
def acme_private_agent(acme: AcmeData) -> Any:
    from agents_app.services import agent_create

    return agent_create(
        name="acme-private-agent", tenant="acme", script=[{"content": "hi"}], tools=["calculate"], provider="scripted"
    )


CHANGELISTS = [
    "/admin/toolhub/toolcall/",
    "/admin/toolhub/auditevent/",
    "/admin/approvals/approvalrequest/?status=all",
    "/admin/agents_app/agentrun/",
    "/admin/agents_app/agent/",
    "/admin/sagas/saga/",
    "/admin/sagas/compensation/",
    "/admin/approvals/webhookdelivery/",
]


@pytest.mark.parametrize("who", ["globex_auditor", "globex_operator", "globex_developer"])
def test_admin_searches_and_orderings_of_globex_staff_find_nothing_of_acme(
    who: str, acme: AcmeData, acme_private_agent: Any, acme_operator: User, request: pytest.FixtureRequest
) -> None:
    """globex's staff search acme's rows by name, user, tenant, tool, run or call id, and sort by every column.

    Tried: each changelist with ``?q=`` of ``acme``, ``alice``, ``debit``, ``create_order``, a run id, a call id,
    a saga key, and with ``?o=`` over its columns (ascending and descending).
    """
    from django.contrib import admin as django_admin

    client = console(request.getfixturevalue(who))
    terms = ["acme", "alice", "debit", "create_order", "crm", str(acme.ledger_run.id), str(acme.artifact_call.id)]
    terms += [acme.saga.key, "acme-private-agent"]
    answered = 0
    for url in CHANGELISTS:
        joiner = "&" if "?" in url else "?"
        response = client.get(url)
        if response.status_code != 200:
            assert response.status_code in (302, 403), (url, response.status_code)
            continue
        columns = len(response.context["cl"].list_display)
        queries = [{"q": term} for term in terms] + [{"o": f"{sign}{i}"} for i in range(1, columns) for sign in "-"]
        queries += [{"o": str(i)} for i in range(1, columns)]
        for query in queries:
            response = client.get(f"{url}{joiner}{urlencode(query)}")
            assert response.status_code == 200, (url, query, response.status_code)
            answered += 1
            rows = list(response.context["cl"].result_list)
            if url.startswith("/admin/agents_app/agent/"):  # global agents are everyone's; acme's own is not
                rows = [agent for agent in rows if agent.tenant_id is not None]
            assert rows == [], (url, query, rows)
            body = response.content.decode()
            if "q" in query:
                body = body.replace(quote(query["q"]), "").replace(query["q"], "")
            leaked = [marker for marker in _acme_markers(acme, url) if marker in body]
            assert not leaked, (url, query, leaked)
    assert answered
    assert django_admin.site.is_registered(Saga)
    # the same searches do find acme's rows for acme's operator: the probe reached them
    own = console(acme_operator)
    for url, term in [("/admin/agents_app/agentrun/", "alice"), ("/admin/sagas/saga/", acme.saga.key)]:
        assert list(own.get(url, {"q": term}).context["cl"].result_list), (url, term)


@pytest.mark.parametrize("role", ["auditors", "operators", "developers"])
def test_fixed_a_tool_group_activated_only_for_globex_shows_acmes_staff_nothing_of_globex(
    role: str, tenant: Tenant, roles: dict[str, Group]
) -> None:
    """acme's staff open the tool groups' list and page (read-only for them, README "Tenants and roles").

    The group ``payments`` is globex's alone: ``activation_rules=[{"tenants": ["globex"], "agents":
    ["globex-treasury"]}]``, approver group ``globex-approvers``, a prompt addition for globex's runs. The first
    probe made sure acme's runs never see it (equipped, offered, searched or prompted). Tried:
    ``GET /admin/toolhub/toolgroup/`` and ``/admin/toolhub/toolgroup/<id>/change/``. Found: both show ``globex``,
    ``globex-treasury``, ``globex-approvers`` and the prompt text. Fixed (``groups.rules_seen_from``): tenant-scoped
    staff see the groups for everyone and those whose rules name one of their tenants, the rules reduced to theirs.
    """
    from toolhub.models import ToolGroup

    approvers = Group.objects.create(name="globex-approvers")
    group = ToolGroup.objects.create(
        name="payments",
        activation_rules=[{"tenants": ["globex"], "agents": ["globex-treasury"]}],
        system_prompt_addition="GLOBEX-PAYMENTS-PROMPT",
        approver_group=approvers,
    )
    page = console(make_user(f"acme-{role}", tenant=tenant, staff=True, groups=(roles[role],)))

    shown = [page.get(url) for url in ("/admin/toolhub/toolgroup/", f"/admin/toolhub/toolgroup/{group.pk}/change/")]

    assert [response.status_code for response in shown] in ([200, 200], [403, 403], [200, 302])
    for response in shown:
        text = response.content.decode()
        leaked = [m for m in ("globex", "GLOBEX-PAYMENTS-PROMPT") if m in text]
        assert not leaked, leaked


def test_a_tool_group_shared_with_globex_shows_acmes_staff_only_acmes_part_of_its_rules(
    tenant: Tenant, roles: dict[str, Group]
) -> None:
    """A group for acme and globex is shown to acme's auditor with its rules reduced to acme's; platform staff
    see them whole."""
    from toolhub.models import ToolGroup

    group = ToolGroup.objects.create(
        name="reports",
        activation_rules=[
            {"tenants": ["globex", "acme"], "roles": ["analysts"]},
            {"tenants": ["globex"]},
            {"roles": ["x"]},
        ],
    )
    auditor = console(make_user("acme-auditor2", tenant=tenant, staff=True, groups=(roles["auditors"],)))
    platform = console(User.objects.create_superuser("platform", "platform@example.com", "platform-password"))
    url = f"/admin/toolhub/toolgroup/{group.pk}/change/"

    listed = auditor.get("/admin/toolhub/toolgroup/").content.decode()
    seen, whole = auditor.get(url).content.decode(), platform.get(url).content.decode()

    assert "reports" in listed and "globex" not in listed
    assert "analysts" in seen and "acme" in seen and "globex" not in seen
    assert "globex" in whole
    assert ToolGroup.objects.get(pk=group.pk).activation_rules[1] == {"tenants": ["globex"]}  # nothing saved


# --- the ``tenant`` a request names -------------------------------------------------------------------------


def test_naming_globex_in_a_requests_tenant_answers_like_a_tenant_that_does_not_exist(
    alice: User, other_tenant: Tenant, tenant: Tenant, roles: dict[str, Group]
) -> None:
    """alice (acme) names ``globex`` wherever a request takes a tenant, and a slug no tenant has.

    Tried: ``POST /api/v1/calls/`` with ``"tenant"``, ``POST /api/v1/runs/`` with ``context.tenant``,
    ``POST /api/v1/sagas/`` with ``"tenant"``, and (as acme's developer) ``POST /api/v1/agents/`` with ``"tenant"``.
    """
    developer = make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],))
    client, dev = client_for(alice), client_for(developer)
    before = database_state()
    posts = [
        (client, "/api/v1/calls/", lambda slug: {"tool": "record_effect", "arguments": {"note": "x"}, "tenant": slug}),
        (client, "/api/v1/runs/", lambda slug: {"agent": "any", "input": "hi", "context": {"tenant": slug}}),
        (client, "/api/v1/sagas/", lambda slug: {"saga_id": "probe", "tenant": slug}),
        (dev, "/api/v1/agents/", lambda slug: {"name": "x", "tenant": slug, "model": {"provider": "scripted"}}),
    ]
    for who, url, body in posts:
        theirs = who.post(url, body("globex"), format="json")
        missing = who.post(url, body("umbrella"), format="json")
        assert theirs.status_code == missing.status_code == 400, (url, theirs.content)
        assert theirs.content.decode().replace("globex", "umbrella") == missing.content.decode(), url
    assert database_state() == before
    assert not Saga.objects.filter(key="probe").exists()


# --- pagination cursors and the OpenAPI schema -----------------------------------------------------------


def _cursor(**fields: str) -> str:
    return base64.b64encode(urlencode(fields).encode()).decode()


@pytest.mark.parametrize(
    "url", ["/api/v1/calls/", "/api/v1/approvals/", "/api/v1/sagas/", "/api/v1/agents/", "/api/v1/tools/"]
)
def test_crafted_cursors_page_through_nothing_of_acme(
    url: str, acme: AcmeData, acme_private_agent: Any, globex_operator: User
) -> None:
    """globex's operator sends cursors of their own making (positions before, after and inside acme's rows).

    Tried: ``?cursor=`` with ``p`` (a position) at the epoch, in the far future and at acme's newest row, in
    both directions and with offsets.
    """
    client = client_for(globex_operator)
    newest = ToolCall.objects.order_by("-created_at").values_list("created_at", flat=True).first()
    assert newest is not None
    positions = ["1970-01-01 00:00:00+00:00", "2999-01-01 00:00:00+00:00", str(newest)]
    markers = _acme_markers(acme, url) + ([] if "agents/" in url else ["debit", "create_order"])
    for position in positions:
        for extra in ({}, {"r": "1"}, {"o": "3"}, {"o": "3", "r": "1"}):
            response = client.get(url, {"cursor": _cursor(p=position, **extra), "page_size": "500"})
            assert response.status_code == 200, (position, extra, response.status_code)
            text = response.content.decode()
            if url != "/api/v1/tools/":  # the catalogue is the same for everyone with the role
                leaked = [marker for marker in markers if marker in text]
                assert not leaked, (url, position, extra, leaked)


@pytest.mark.parametrize("url", ["/api/v1/calls/", "/api/v1/approvals/", "/api/v1/sagas/"])
def test_fixed_a_cursor_holding_a_position_that_is_no_time_is_refused(url: str, globex_operator: User) -> None:
    """Tried: ``?cursor=`` of ``p=acme`` (base64). Found: an uncaught ``ValidationError`` (500 and a logged traceback)
    where a bad cursor should answer 400 or 404 like DRF's "Invalid cursor" (README, "Bad input and abuse").
    Fixed: the pagination checks the position is a time and answers DRF's 404 "Invalid cursor"."""
    client = client_for(globex_operator)
    client.raise_request_exception = False

    response = client.get(url, {"cursor": _cursor(p="acme")})

    assert (response.status_code, response.json()) == (404, {"detail": "Invalid cursor"})


def test_the_openapi_schema_names_no_tenant_user_agent_or_tool(acme: AcmeData, api_client: APIClient) -> None:
    """The schema endpoint is open to anonymous clients (drf-spectacular's default): it must describe, not list.

    Tried: ``GET /api/schema/`` anonymously, searching it for tenants, users, agents and tool names.
    """
    response = api_client.get("/api/schema/")

    assert response.status_code == 200
    text = response.content.decode()
    for marker in ["acme", "globex", "ACME Corp", "alice", "acme-ledger", "crm_lookup", "export_file", "debit"]:
        assert marker not in text, marker
    assert "/api/v1/calls/" in text


# --- four eyes: every channel, the requester, one person twice, an edit then an approval --------------------


def _bulk_approve(client: Client, request: ApprovalRequest) -> None:
    request.refresh_from_db()
    form = {
        "action": "approve_selected",
        "_selected_action": [str(request.pk)],
        "apply": "1",
        "comment": "bulk",
        **marks_field([row_mark(request.pk, request.arguments_hash, shown_fields_version(request.tool_name))]),
    }
    client.post("/admin/approvals/approvalrequest/?status=all", form)


def _page_approve(client: Client, request: ApprovalRequest, **extra: str) -> None:
    request.refresh_from_db()
    form = {"comment": "page", "round": str(request.round), "arguments_hash": request.arguments_hash, **extra}
    client.post(f"/admin/approvals/approvalrequest/{request.pk}/approve/", form)


def _approvals_counted(request: ApprovalRequest) -> tuple[str, int, int]:
    request.refresh_from_db()
    decisions = ApprovalDecision.objects.filter(request=request, round=request.round).exclude(decision="reject")
    return request.status, request.round, decisions.count()


def test_four_eyes_hold_on_every_channel_for_the_requester_a_second_approval_and_an_edit(
    tenant: Tenant, roles: dict[str, Group]
) -> None:
    """An operator who requested a call, an operator approving twice, an operator editing then approving.

    A rule asks two approvals of ``risky_effect`` in acme. Tried, by the requester (an operator): API approve,
    API approve with an edit, the change page's approve and its JSON edit box, the bulk action. By a second
    operator who approved once over the API: the bulk action and the change page again. By that operator
    after editing (a new round their edit counts once in): the change page and the bulk action with the new
    version. Only a third operator's approval of the edited version releases the call.
    """
    operators = roles["operators"]
    requester, second, third = (
        make_user(name, tenant=tenant, staff=True, groups=(operators,)) for name in ("op-req", "op-two", "op-three")
    )
    ApprovalRule.objects.create(name="two-for-risky", tenant=tenant, tool_name="risky_effect", required_approvals=2)
    held = client_for(requester).post(
        "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "wire 10"}}, format="json"
    )
    assert held.status_code == 202, held.content
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])
    assert request.required_approvals == 2

    # the requester, everywhere
    api = client_for(requester)
    assert api.post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json").status_code == 403
    edit = {"round": 1, "arguments": {"note": "wire 99"}}
    assert api.post(f"/api/v1/approvals/{request.pk}/approve/", edit, format="json").status_code == 403
    own_console = console(requester)
    _page_approve(own_console, request)
    _page_approve(own_console, request, arguments='{"note": "wire 99"}')
    _bulk_approve(own_console, request)
    assert _approvals_counted(request) == (ApprovalStatus.PENDING, 1, 0)

    # the second operator approves once, then again through the console
    approved = client_for(second).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert approved.status_code == 200, approved.content
    second_console = console(second)
    _bulk_approve(second_console, request)
    _page_approve(second_console, request)
    assert _approvals_counted(request) == (ApprovalStatus.PENDING, 1, 1)

    # the second operator edits (round 2, their edit counts once), then approves the version they made
    edited = client_for(second).post(
        f"/api/v1/approvals/{request.pk}/approve/", {"round": 1, "arguments": {"note": "wire 11"}}, format="json"
    )
    assert edited.status_code == 200, edited.content
    _page_approve(second_console, request)
    _bulk_approve(second_console, request)
    again = client_for(second).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 2}, format="json")
    assert again.status_code == 403
    assert _approvals_counted(request) == (ApprovalStatus.PENDING, 2, 1)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL

    # a third operator, who saw the edited version, releases it
    _page_approve(console(third), request)
    assert _approvals_counted(request)[0] == ApprovalStatus.APPROVED
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.SUCCEEDED and call.arguments == {"note": "wire 11"}


# --- sensitive arguments on every page and answer around a held call ----------------------------------------

SECRET = "sk-probe-b-never-shown-7f3a"


@tool(sensitive=("api_token",), risk="high")
def probe_b_secure_lookup(
    customer: Annotated[str, Param("The customer.")],
    api_token: Annotated[str, Param("The CRM token.")],
) -> dict:
    """Look a customer up in the CRM with a token."""
    return {"customer": customer}


@pytest.fixture
def secure_tool() -> Iterator[None]:
    with registry.temporarily(probe_b_secure_lookup):
        yield


def test_a_sensitive_argument_shows_on_no_page_answer_webhook_or_export_around_a_held_call(
    secure_tool: None, alice: User, acme_operator: User, settings: Any
) -> None:
    """A held call with a sensitive argument, from a run and over the API, seen from every place an operator looks.

    Tried: the approval desk, each request's page, the bulk action's confirmation page, the run list and page,
    the calls' pages, the audit events' list and pages, the webhook deliveries' list and pages, the CSV and JSONL
    exports, and the API's approvals, runs, calls and sagas; then again after an operator edits the customer.
    """
    from agents_app.services import agent_create, run_start

    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "http://127.0.0.1:9/hook"}
    arguments = {"customer": "ada", "api_token": SECRET}
    agent = agent_create(
        name="probe-b-crm",
        tenant="acme",
        tools=["probe_b_secure_lookup"],
        script=[{"tool_calls": [{"name": "probe_b_secure_lookup", "arguments": arguments}]}, {"content": "ok"}],
    )
    run = run_start(agent=agent, user=alice, input="look ada up")
    held = client_for(alice).post(
        "/api/v1/calls/", {"tool": "probe_b_secure_lookup", "arguments": arguments}, format="json"
    )
    assert held.status_code == 202, held.content
    requests = list(ApprovalRequest.objects.filter(tool_name="probe_b_secure_lookup").order_by("pk"))
    assert len(requests) == 2
    page = console(acme_operator)
    api = client_for(acme_operator)
    first = requests[0]
    api.post(f"/api/v1/approvals/{first.pk}/approve/", {"round": 1, "arguments": {"customer": "bob"}}, format="json")

    urls = [
        "/admin/approvals/approvalrequest/?status=all",
        "/admin/agents_app/agentrun/",
        f"/admin/agents_app/agentrun/{run.pk}/change/",
        "/admin/toolhub/toolcall/",
        "/admin/toolhub/auditevent/",
        "/admin/approvals/webhookdelivery/",
        "/api/v1/approvals/?status=",
        f"/api/v1/runs/{run.pk}/",
        "/api/v1/calls/",
        "/api/v1/sagas/",
    ]
    urls += [f"/admin/approvals/approvalrequest/{r.pk}/change/" for r in requests]
    urls += [f"/api/v1/approvals/{r.pk}/" for r in requests]
    urls += [f"/admin/toolhub/toolcall/{r.call_id}/change/" for r in requests]
    urls += [f"/api/v1/calls/{r.call_id}/" for r in requests]
    # every event of the operator's tenant (the platform's own, e.g. the role groups' set-up, are not theirs to read)
    events = AuditEvent.objects.filter(tenant="acme").values_list("pk", flat=True)
    urls += [f"/admin/toolhub/auditevent/{pk}/change/" for pk in events]
    urls += [f"/admin/approvals/webhookdelivery/{pk}/change/" for pk in _delivery_ids()]
    assert _delivery_ids(), "the webhook deliveries were recorded"
    shown = 0
    for url in urls:
        client = api if url.startswith("/api/") else page
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        assert SECRET not in response.content.decode(), url
        shown += 1
    for export in ("csv", "jsonl"):
        response = page.post(f"/admin/toolhub/toolcall/export/{export}/")
        text = b"".join(response.streaming_content).decode()
        assert "probe_b_secure_lookup" in text and SECRET not in text, export
    confirmation = page.post(
        "/admin/approvals/approvalrequest/?status=all",
        {"action": "approve_selected", "_selected_action": [str(r.pk) for r in requests]},
    )
    assert confirmation.status_code == 200 and "probe_b_secure_lookup" in confirmation.content.decode()
    assert SECRET not in confirmation.content.decode()
    assert not any(SECRET[:12] in str(data) for data in AuditEvent.objects.values_list("data", flat=True))
    assert shown == len(urls)


def _delivery_ids() -> list[int]:
    from approvals.models import WebhookDelivery

    return list(WebhookDelivery.objects.values_list("pk", flat=True))
