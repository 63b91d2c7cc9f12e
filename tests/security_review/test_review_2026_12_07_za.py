"""Review 2026-12-07 (za): review r's tenant read on every REST request (``toolhub.api.named_tenant``), tried to break.

Seen by alice (acme's member), dana (a member of acme and globex) and nobody signed in.

Findings:

1. The OpenAPI document did not say where a request names its tenant. Every ``/api/v1/`` view reads ``?tenant=`` and
   ``X-Toolhub-Tenant`` (``NamesOneOfTheirTenants``, a default permission and the agents views'; every list filters by
   them, ``NamedTenantFilter``), yet the header was documented on no operation and ``?tenant=`` only on the run list
   (its filter set), a saga's page and rollback and the tool listing and export: the call, approval, saga and agent
   lists that filter by it, and the writes that make a call, saga, run or agent in it, documented neither, so a
   generated client could not name a tenant (and ``schemathesis`` never sent one). Fix: ``ToolhubAutoSchema`` adds
   both, as ``toolhub.api.named_tenant.named_tenant_parameters`` words them (a list: what is in that tenant; others:
   the tenant the operation takes, else only checked), to every operation of a view whose permissions hold
   ``NamesOneOfTheirTenants`` (``reads_named_tenant``); a view's own account (a saga id's tenant, the tools') still
   comes last and wins. ``test_every_operation_documents_the_tenant_query_and_header_it_reads``.

Checked and holding:

- Views with their own ``permission_classes`` or ``filter_backends`` (grep of every APIView, generic view and
  ``@api_view`` in toolhub, agents_app, approvals): only the agents views name permissions, and they keep
  ``NamesOneOfTheirTenants``; none names filter backends; there are no viewsets, ``@action`` routes or nested routes.
  Every detail route's URL kwarg is its view's ``lookup_field`` (``pk``) or the view reads the row itself (calls, a
  saga by ``saga_id`` in ``visible_saga``, agents), so no detail read is filtered by the named tenant and no list
  skips the filter. ``test_holding_a_detail_by_id_is_read_in_its_own_tenant_a_list_in_the_named_one``.
- Pagination: a cursor made in acme's list, used with globex named, pages through globex's rows only (the filter
  runs on every page; the cursor is a position, not a tenant).
  ``test_holding_a_cursor_made_under_one_tenant_pages_only_the_tenant_named``.
- Statement counts: naming a tenant adds no statement to a list (the filter is a ``WHERE``; the membership check reads
  the scope already read), so ``tests/posture/test_api_query_counts.py``'s pins hold with or without one.
  ``test_holding_naming_a_tenant_adds_no_statement_to_a_list``.
- Unauthenticated entrances: ``/api/schema/`` (AllowAny, no rows) answers with a tenant named; every ``/api/v1/`` view
  answers an anonymous request 401 before the tenant is read (``IsAuthenticated`` first). MCP reads the tenant
  through ``tenant_named`` (review h). Webhooks are outbound only; tokens are issued by the admin, no endpoint.
  ``test_holding_anonymous_requests_naming_a_tenant_read_nothing``.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.models import AgentRun
from agents_app.services import agent_create
from tests.security_review.conftest import client_for
from toolhub.direct import TENANT_HEADER
from toolhub.models import Tenant, TenantMembership
from toolhub.sagas.models import Saga
from toolhub.sagas.services import saga_open

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(tenant: Tenant, other_tenant: Tenant) -> User:
    """A member of acme and globex."""
    user = User.objects.create_user("dana", "dana@example.com", "dana-password")
    TenantMembership.objects.create(user=user, tenant=tenant)
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


def _sagas(user: User, count: int, tenant: str) -> list[str]:
    return [
        saga_open(key=f"{tenant}-{number}", tenant=tenant, user=user, actor=f"user:{user.username}").key
        for number in range(count)
    ]


def test_every_operation_documents_the_tenant_query_and_header_it_reads(db: None) -> None:
    """Found: the header was documented nowhere and ``?tenant=`` only on the run list, a saga's page and rollback and
    the tools, though every ``/api/v1/`` operation reads both (the lists filter by them, writes make rows in them).
    Expect: every operation documents ``?tenant=`` and ``X-Toolhub-Tenant``; a list's say it shows that tenant's rows,
    and the saga and tool views keep their own wording of ``?tenant=``.
    """
    document = client_for(User.objects.create_user("reader")).get("/api/schema/?format=json").json()
    operations = {
        (method.upper(), path): {
            (parameter["in"], parameter["name"]): parameter for parameter in op.get("parameters", [])
        }
        for path, ops in document["paths"].items()
        for method, op in ops.items()
    }

    assert len(operations) >= 25
    missing = [
        key
        for key, parameters in operations.items()
        if not {("query", "tenant"), ("header", TENANT_HEADER)} <= set(parameters)
    ]
    assert missing == []
    for key in [("GET", "/api/v1/calls/"), ("GET", "/api/v1/approvals/"), ("GET", "/api/v1/sagas/")]:
        assert operations[key]["header", TENANT_HEADER]["description"].startswith(
            "One of your tenants' slugs: the list"
        )
    assert operations["GET", "/api/v1/sagas/{saga_id}/"]["query", "tenant"]["description"].startswith("Your tenant")
    assert "a row it makes" in operations["POST", "/api/v1/calls/"]["query", "tenant"]["description"]


def test_holding_a_cursor_made_under_one_tenant_pages_only_the_tenant_named(dana: User) -> None:
    """Holding: dana pages acme's sagas two at a time, then follows acme's ``next`` cursor naming globex.
    Expect: globex's rows behind the cursor's position (all three, older) and no acme saga, page by page to the end;
    acme's own page holds acme's only.
    """
    globex = set(_sagas(dana, 3, "globex"))  # older than acme's: all behind the cursor's position
    acme = set(_sagas(dana, 3, "acme"))
    client = client_for(dana)

    first = client.get("/api/v1/sagas/?tenant=acme&page_size=2").json()
    cursor = first["next"].split("cursor=")[1].split("&")[0]
    seen: list[str] = []
    url: str | None = f"/api/v1/sagas/?cursor={cursor}&page_size=2"
    while url:
        page = client.get(url, HTTP_X_TOOLHUB_TENANT="globex").json()
        seen += [row["key"] for row in page["results"]]
        url = page["next"]

    assert {row["key"] for row in first["results"]} <= acme
    assert sorted(seen) == sorted(globex), seen


def test_holding_naming_a_tenant_adds_no_statement_to_a_list(dana: User) -> None:
    """Holding: the call, saga, run, approval and agent lists issue as many statements naming a tenant (``?tenant=``
    or the header) as naming none, so the pinned query counts hold either way.
    Expect: equal counts per list.
    """
    _sagas(dana, 2, "acme")
    counts = {}
    for path in ("/api/v1/calls/", "/api/v1/sagas/", "/api/v1/runs/", "/api/v1/approvals/", "/api/v1/agents/"):
        client_for(User.objects.get(pk=dana.pk)).get(path)  # the process's governance lookups, read once
        for how, query, extra in (
            ("none", "", {}),
            ("query", "?tenant=acme", {}),
            ("header", "", {"HTTP_X_TOOLHUB_TENANT": "acme"}),
        ):
            client = client_for(User.objects.get(pk=dana.pk))  # as each request loads its user afresh
            with CaptureQueriesContext(connection) as captured:
                answer = client.get(path + query, **extra)
            assert answer.status_code == 200, (path, how, answer.content)
            counts[path, how] = len(captured.captured_queries)

    for path in {path for path, _ in counts}:
        assert counts[path, "none"] == counts[path, "query"] == counts[path, "header"], (path, counts)


def test_holding_a_detail_by_id_is_read_in_its_own_tenant_a_list_in_the_named_one(dana: User) -> None:
    """Holding: the filter's skip keys on the view's lookup kwarg; every detail route's kwarg is it (or the view reads
    its row itself). Expect: dana naming acme reads acme's saga and gets 404 for globex's saga id (a saga id is looked
    up in the tenant named), and acme's list shows acme's saga only; globex's run is read by
    its id with acme named, and not listed in acme's runs.
    """
    (acme_key,) = _sagas(dana, 1, "acme")
    (globex_key,) = _sagas(dana, 1, "globex")
    client = client_for(dana)

    listed = client.get("/api/v1/sagas/", HTTP_X_TOOLHUB_TENANT="acme").json()["results"]
    own = client.get(f"/api/v1/sagas/{acme_key}/", HTTP_X_TOOLHUB_TENANT="acme")
    other = client.get(f"/api/v1/sagas/{globex_key}/", HTTP_X_TOOLHUB_TENANT="acme")

    assert [row["key"] for row in listed] == [acme_key]
    assert own.status_code == 200 and own.json()["key"] == acme_key
    assert other.status_code == 404
    assert Saga.objects.count() == 2

    # A run's page is a RetrieveAPIView (the filter runs, keyed on ``pk``): read in its own tenant, not the named one.
    agent = agent_create(name="helper", tenant=None, script=[{"content": "Hello."}])
    run = AgentRun.objects.create(agent=agent, user=dana, tenant="globex", input="x")
    page = client.get(f"/api/v1/runs/{run.pk}/", HTTP_X_TOOLHUB_TENANT="acme")
    runs = client.get("/api/v1/runs/", HTTP_X_TOOLHUB_TENANT="acme").json()["results"]
    assert page.status_code == 200 and page.json()["id"] == str(run.pk), page.content
    assert runs == []


def test_holding_anonymous_requests_naming_a_tenant_read_nothing(other_tenant: Tenant) -> None:
    """Holding: nobody signed in naming globex. Expect: the schema answers 200 (it reads no row); every list and a
    write answer 401 before the tenant is read, naming no tenant in the answer.
    """
    client: Any = client_for(User(username="nobody"))
    client.force_authenticate(user=None)
    schema = client.get("/api/schema/?tenant=globex", HTTP_X_TOOLHUB_TENANT="globex")
    answers = [
        client.get(path, HTTP_X_TOOLHUB_TENANT="globex")
        for path in ("/api/v1/calls/", "/api/v1/sagas/", "/api/v1/runs/", "/api/v1/approvals/", "/api/v1/agents/")
    ] + [client.post("/api/v1/sagas/?tenant=globex", {}, format="json")]

    assert schema.status_code == 200
    assert [answer.status_code for answer in answers] == [401] * 6, [answer.content for answer in answers]
    assert not any(b"globex" in answer.content for answer in answers)
