"""Review 2026-12-07 (k): review h's one reading of the tenant a request names (``tenant_named``).

Seen by alice (acme's member), dana (a member of acme and globex), acme's developer and an administrator.

Findings:

1. ``POST /api/v1/agents/`` read only the body's ``tenant`` (h left it): globex's developer posting
   ``?tenant=acme`` or ``X-Toolhub-Tenant: acme`` got an agent in globex (201). Fix: ``agents_app.api._agent_tenant``
   reads through ``request_tenant_named``; a tenant they are not in is refused as in the body ("Unknown tenant ...
   among yours", the text a missing tenant gets).
   ``test_an_agent_naming_a_tenant_outside_the_body_is_made_there_or_refused``.
2. The hole h asked about: an administrator posting ``"tenant": null`` with ``X-Toolhub-Tenant: acme`` (or
   ``?tenant=acme``) got a global agent, run by every tenant. Fix: the body's ``null`` with a tenant named elsewhere
   is refused as two places naming different tenants (400, nothing made); the header alone makes acme's agent.
   ``test_a_global_agent_asked_with_a_tenant_named_elsewhere_is_refused``.
3. A regression of h's fix: ``POST /api/v1/runs/`` with ``"context": {"tenant": ["acme"]}`` (or an object) answered
   500 (``tenant_named`` hashed the value: ``TypeError: unhashable``); it was 400 before. Fix: ``tenant_named``
   refuses a body's tenant that is no string (400). ``test_a_run_whose_context_tenant_is_no_string_is_refused_not_500``.
4. ``POST /api/v1/sagas/{id}/rollback/`` (and the saga's page) read ``?tenant=`` only: dana (acme and globex) with
   ``X-Toolhub-Tenant: globex`` rolled back acme's saga of that id (202, its step undone), and ``?tenant=acme`` with
   the header naming globex was not refused. Fix: ``visible_saga`` reads the tenant through
   ``request_tenant_named`` (a header names the saga's tenant as ``?tenant=`` does; the two differing are 400).
   ``test_a_saga_rollback_naming_another_tenant_in_the_header_rolls_back_nothing``.

Checked and holding:

- Other places reading a tenant from a request (grep of ``query_params``, ``request.GET``, headers, ``request.data``):
  the tool listing's ``?tenant=`` (``_tenants_for``, a read: one of yours, else 400, same text for a missing one);
  the run list's ``?tenant=`` filter (GET, unchanged by h: dana filtering on acme still gets 200, with the header
  naming globex too, since a list reads no header); the call list has no tenant filter.
  Writes by id (a call's or run's cancel, retry, rollback; approvals) act on the row's own tenant, read through
  the visible-to selectors. There are no OpenAI-compatible endpoints served (``agents_app/models_adapters`` are
  clients of providers), and MCP has no resources or prompts handlers; ``tools/list``, find and describe read
  ``request_principal`` (the one reading), status and cancel act by call id on a call the caller may see.
- A member of two tenants naming none: refused, listing their tenants, by calls, sagas, runs and agents (README).
- ``?tenant=ACME``, ``?tenant=%20acme``: slugs compare exactly, so refused as a tenant the caller is not in;
  ``?tenant=acme&tenant=acme`` is one value ``acme, acme``, refused as the README says of repeated values.
- A refused tenant's text is one for a missing tenant and another's (calls, sagas, runs: ``caller_principal`` /
  ``_run_tenant``; agents: "Unknown tenant ... among yours"). A renamed or retired slug was not tried.
- Idempotency keys are claimed per (tenant, user, key) after the tenant is resolved: a replay naming another tenant
  of the caller's is a new call there, one naming a tenant not theirs is refused before the key is read.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_create
from tests.api.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub.models import Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db

AGENT = {"name": "greeter", "model": {"provider": "scripted", "script": [{"content": "Hello."}]}}


@pytest.fixture
def dana(tenant: Tenant, other_tenant: Tenant) -> User:
    """A member of acme and globex."""
    user = User.objects.create_user("dana", "dana@example.com", "dana-password")
    TenantMembership.objects.create(user=user, tenant=tenant)
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


@pytest.fixture
def root(tenant: Tenant, other_tenant: Tenant) -> User:
    """An administrator who acts on every tenant (may make global agents) and is a member of none."""
    return User.objects.create_superuser("root", "root@example.com", "root-password")


def _post(user: User, path: str, body: Any, **headers: str) -> Any:
    return client_for(user).post(path, body, format="json", **headers)


def test_an_agent_naming_a_tenant_outside_the_body_is_made_there_or_refused(
    globex_developer: User, tenant: Tenant
) -> None:
    """Found: ``POST /api/v1/agents/?tenant=acme`` (or ``X-Toolhub-Tenant: acme``) by globex's developer made the
    agent in globex (201): the agents' write read the body's ``tenant`` only, as h's fix left it.
    Expect: read as every write reads it (``request_tenant_named``): a tenant the developer is not in refused (400,
    the text a missing tenant gets), nothing made; naming their own tenant there is heard.
    """
    by_query = _post(globex_developer, "/api/v1/agents/?tenant=acme", AGENT)
    by_header = _post(globex_developer, "/api/v1/agents/", AGENT, HTTP_X_TOOLHUB_TENANT="acme")
    missing = _post(globex_developer, "/api/v1/agents/?tenant=no-such", AGENT)

    assert (by_query.status_code, by_header.status_code) == (400, 400), (by_query.content, by_header.content)
    # Refused before the view, as every request naming a tenant not theirs is (review 2026-12-07 r).
    assert (
        by_query.json()
        == by_header.json()
        == {"detail": "You are not a member of tenant 'acme'; give the slug of one of yours."}
    )
    assert missing.json() == {"detail": "You are not a member of tenant 'no-such'; give the slug of one of yours."}
    assert not Agent.objects.exists()
    own = _post(globex_developer, "/api/v1/agents/", AGENT, HTTP_X_TOOLHUB_TENANT="globex")
    assert own.status_code == 201 and own.json()["tenant"] == "globex", own.content


def test_a_global_agent_asked_with_a_tenant_named_elsewhere_is_refused(superuser: User, tenant: Tenant) -> None:
    """Found: an administrator posting ``"tenant": null`` with ``X-Toolhub-Tenant: acme`` (or ``?tenant=acme``) got a
    global agent (201), one every tenant's users run, though acme was named.
    Expect: 400 saying the null body and the query or header differ, nothing made; the header alone makes acme's
    agent, the body's ``null`` alone a global one.
    """
    header = _post(superuser, "/api/v1/agents/", {**AGENT, "tenant": None}, HTTP_X_TOOLHUB_TENANT="acme")
    query = _post(superuser, "/api/v1/agents/?tenant=acme", {**AGENT, "tenant": None})

    assert (header.status_code, query.status_code) == (400, 400), (header.content, query.content)
    assert header.json() == {
        "detail": "the body's tenant (null: a global agent) and ?tenant= or the X-Toolhub-Tenant header name "
        "different tenants; name one."
    }
    assert not Agent.objects.exists()
    in_acme = _post(superuser, "/api/v1/agents/", AGENT, HTTP_X_TOOLHUB_TENANT="acme")
    made_global = _post(superuser, "/api/v1/agents/", {**AGENT, "tenant": None})
    assert (in_acme.status_code, made_global.status_code) == (201, 201), (in_acme.content, made_global.content)
    assert (in_acme.json()["tenant"], made_global.json()["tenant"]) == ("acme", None)


@pytest.mark.parametrize("named", [["acme"], {"slug": "acme"}], ids=["list", "object"])
def test_a_run_whose_context_tenant_is_no_string_is_refused_not_500(alice: User, named: Any) -> None:
    """Found: ``POST /api/v1/runs/`` with ``"context": {"tenant": ["acme"]}`` (or an object) answered 500:
    ``tenant_named`` put the value in a set (``TypeError: unhashable``); before h's fix it was refused (400).
    Expect: 400 saying the tenant must be a slug; no run.
    """
    agent_create(name="greeter", tenant="acme", script=AGENT["model"]["script"])
    client = client_for(alice)
    client.raise_request_exception = False

    response = client.post(
        "/api/v1/runs/", {"agent": "greeter", "input": "hi", "context": {"tenant": named}}, format="json"
    )

    assert response.status_code == 400, response.content
    assert response.json() == {"detail": "The tenant must be a tenant's slug (a string)."}
    assert not AgentRun.objects.exists()


def test_a_saga_rollback_naming_another_tenant_in_the_header_rolls_back_nothing(
    dana: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: dana (acme and globex) posting ``/api/v1/sagas/trip/rollback/`` with ``X-Toolhub-Tenant: globex``
    rolled back acme's saga ``trip`` (202, its step undone): ``visible_saga`` read ``?tenant=`` only, and
    ``?tenant=acme`` with the header naming globex was not refused either.
    Expect: the header read as ``?tenant=`` is (``request_tenant_named``): no saga ``trip`` in globex (404), the
    two naming different tenants 400; nothing undone. Named acme, the rollback runs.
    """
    client = client_for(dana)
    with django_capture_on_commit_callbacks(execute=True):
        step = client.post(
            "/api/v1/calls/",
            {"tool": "saga_step", "arguments": {"label": "x"}, "tenant": "acme", "saga_id": "trip"},
            format="json",
        )
    assert ToolCall.objects.get(pk=step.json()["id"]).status == "succeeded", step.content

    with django_capture_on_commit_callbacks(execute=True):
        other = client.post("/api/v1/sagas/trip/rollback/", HTTP_X_TOOLHUB_TENANT="globex")
        differ = client.post("/api/v1/sagas/trip/rollback/?tenant=acme", HTTP_X_TOOLHUB_TENANT="globex")
        read = client.get("/api/v1/sagas/trip/", HTTP_X_TOOLHUB_TENANT="globex")

    assert (other.status_code, differ.status_code, read.status_code) == (404, 400, 404), (other.content, differ.content)
    assert differ.json() == {"detail": "?tenant= and the X-Toolhub-Tenant header name different tenants; name one."}
    assert not SideEffect.objects.filter(tool="undo_saga_step").exists()
    with django_capture_on_commit_callbacks(execute=True):
        own = client.post("/api/v1/sagas/trip/rollback/", HTTP_X_TOOLHUB_TENANT="acme")
    assert own.status_code == 202, own.content
    assert SideEffect.objects.filter(tool="undo_saga_step").count() == 1


def test_holding_case_spaces_repeats_and_list_filters(dana: User, alice: User) -> None:
    """Holding: a slug is compared exactly (``ACME``, `` acme`` are refused as not the caller's, one text), a
    repeated parameter is one list, refused; dana's run list filtered on acme with the header naming globex is
    refused (review 2026-12-07 r: lists read the header as writes do)."""
    refused = [
        _post(alice, path, {"tool": "record_effect", "arguments": {"note": "n"}}).json()
        for path in (
            "/api/v1/calls/?tenant=ACME",
            "/api/v1/calls/?tenant=%20acme",
            "/api/v1/calls/?tenant=acme&tenant=acme",
        )
    ]
    assert refused == [
        {"detail": f"You are not a member of tenant {name!r}; give the slug of one of yours."}
        for name in ("ACME", " acme", "acme, acme")
    ]
    assert not ToolCall.objects.exists()
    # A list reads the header as writes do since review 2026-12-07 r: the two naming different tenants are refused.
    listed = client_for(dana).get("/api/v1/runs/?tenant=acme", HTTP_X_TOOLHUB_TENANT="globex")
    assert listed.status_code == 400, listed.content
