"""The tenant-boundary guard over every URL the project serves: each is swept, or listed here with why.

The inventory is read at run time from the URL resolver and the admin site's registry (and the ASGI app's MCP
mount), so a new page is covered or named without editing this file: an admin page of a registered ModelAdmin or
one it adds, an API route and every method its view answers, and the few other pages (Django's built-ins, the API
schema) each fall in one class; a pattern in none fails the first test, naming it. The sweeps themselves live where
they were (extended here, not duplicated): ``tests/tenancy/test_admin_sweep.py`` (every change list plain, searched,
as a popup, by date, its filters' choices, each acme row's change/history/delete page, every action on acme's rows,
every autocomplete, every custom admin page), ``tests/tenancy/test_api_sweep.py`` (every API GET list and detail,
every POST on a row) and ``tests/tenancy/test_mcp_sweep.py`` (the MCP server's capabilities and tools). This module
adds what those did not ask, for tenant globex's operator, auditor and developer (a staff user with no tenant too)
in the console and globex's operator, auditor and member holding real API tokens (``Authorization: Token``):

- every API route with a row in its path, with EVERY method its view answers (``PATCH`` of an agent too, not only
  GET/POST), answers for acme's row exactly as for a missing row, and changes nothing;
- every API list filtered by parameters naming acme through related fields (``tenant__name``, ``tenant__slug``,
  ``user__username``, ``run__tenant``, ...) answers exactly as the same filter naming nothing;
- every tenant-scoped admin's change, history and delete page and its bare ``<id>/`` redirect, read and posted,
  answers for acme's row exactly as for a missing id (status, where it redirects, the page, the messages);
- every tenant-scoped admin's change list filtered through its tenant field (``=``, ``__exact``, ``__in``,
  ``__iexact``, ``__startswith``), through ``tenant__name`` / ``tenant__slug``, or searched for an acme row's id,
  lists and counts exactly what the same filter naming a missing tenant or id does;
- every registered admin's add page (in no other sweep) is refused or offers only the viewer's tenants and no row
  of acme in its selects;
- the calls export filtered toward acme, and the audit trail's export and "verify now" naming acme (in any
  spelling), answer as for a tenant that does not exist.

Findings: none. Every probe below held on the code as found (BASE 2c06cf96).

Checked and holding (besides the tests here), probed by hand this session:
- Add pages: tenant-scoped operators and auditors get 403 on every registered admin's add page; a developer's add
  pages (grants, approval rules, agents) offer only their own tenant and shared tool groups and providers.
- Global agents (no tenant) named ``acme-*`` are shown to every tenant by design; shared tool groups' help text
  names "acme" as an example only.
- ``POST /api/v1/sagas/`` with acme's saga key makes globex's own saga (keys are per tenant: no existence oracle);
  ``POST /api/v1/runs/`` naming acme's agent by id or name answers as an unknown agent does; ``POST/PATCH`` of
  agents by a member without the developers role is refused alike for acme's and missing rows.
- The calls export rejects lookups through relations (``tenant__name``, ``user__username``) with the same 400
  whatever they name.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db.models import Model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from agents_app.models import Agent
from tests.helpers import console
from tests.posture.test_api_query_counts import api_get_routes
from tests.tenancy.conftest import AcmeData, database_state
from tests.tenancy.test_admin_sweep import (  # noqa: F401 - fixtures, registered by being imported here
    BUILT_IN,
    _custom_admin_routes,
    _missing,
    _scoped_admins,
    _url,
    acme_everywhere,
    tenantless_staff,
)
from tests.tenancy.test_api_sweep import (  # noqa: F401 - a fixture, registered by being imported here
    _fill,
    _markers,
    _parameters,
    acme_agent,
    api_post_routes,
)
from toolhub.api.keys import api_key_issue
from toolhub.exports import EXPORT_FORMATS
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.django_db(transaction=True)

METHODS = ("get", "post", "put", "patch", "delete")
API = "api/v1/"
#: Served patterns no sweep exercises against a tenant's rows, and why. A new unlisted pattern fails the inventory.
NOT_SWEPT: dict[str, str] = {
    "": "redirects to the console's index; reads no row",
    "admin/(?P<url>.*)$": "Django's catch-all: a slash-appended redirect or 404, decided by the URL alone",
    "admin/^(?P<app_label>authtoken|toolhub|auth|axes|sagas|approvals|agents_app|openai_agents_adapter|demo)/$": (
        "an app's index: the admin index's list of models the viewer may open (no row; rows by model are swept)"
    ),
}
#: Django's admin pages by name that read no tenant's row (``autocomplete`` is swept in tests/tenancy).
BUILT_IN_WHY = {name: "Django's own page: login, logout, password, index, translations" for name in BUILT_IN}
#: Served outside the URL resolver (``toolhub.asgi``): where the MCP endpoint is swept.
ASGI_MOUNTS = {"/mcp": "tests/tenancy/test_mcp_sweep.py: every declared capability and the server's own tools"}
#: Pages of the API's documentation, read here for any row of acme (they are drawn from the code only).
API_DOCS = ("api/schema/", "api/docs/")
#: Filters naming acme through related fields, each beside the same filter naming nothing.
RELATED_FILTERS: tuple[tuple[str, str, str], ...] = (
    ("tenant", "acme", "nope"),
    ("tenant__slug", "acme", "nope"),
    ("tenant__name", "ACME Corp", "Nope Corp"),
    ("tenant__name__icontains", "acme", "nope"),
    ("tenant__in", "acme", "nope"),
    ("user", "alice", "nobody"),
    ("user__username", "alice", "nobody"),
    ("username", "alice", "nobody"),
    ("run__tenant", "acme", "nope"),
    ("agent__tenant", "acme", "nope"),
    ("agent", "acme-private-agent", "nope-agent"),
    ("saga__tenant", "acme", "nope"),
    ("search", "ACME Corp", "Nope Corp"),
)
BODY = {"result": {"name": "Mallory"}, "comment": "x", "reason": "x", "description": "taken", "note": "x"}


def _patterns() -> list[tuple[str, Any]]:
    """Every pattern the resolver serves, as its full route, with the pattern itself."""
    found: list[tuple[str, Any]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                found.append((prefix + str(entry.pattern), entry))

    walk(get_resolver().url_patterns, "")
    return found


def _view_methods(entry: URLPattern) -> list[str]:
    """The HTTP methods an API route's view answers (its class's handlers)."""
    view = getattr(entry.callback, "view_class", None) or getattr(entry.callback, "cls", None)
    actions = getattr(entry.callback, "actions", None) or {}
    return [method for method in METHODS if method in actions or (not actions and hasattr(view, method))]


def _admin_model_routes() -> dict[str, str]:
    """The standard pages of every registered ModelAdmin, by URL name (what tests/tenancy/test_admin_sweep sweeps)."""
    names: dict[str, str] = {}
    for model in admin.site._registry:
        label = f"{model._meta.app_label}_{model._meta.model_name}"
        for view in ("changelist", "add", "change", "delete", "history"):
            names[f"{label}_{view}"] = f"{model._meta.label}: {view}"
    return names


def _redirect_to_change(route: str, entry: URLPattern) -> bool:
    """A registered admin's bare ``<app>/<model>/<object_id>/``: Django's redirect to the change page (swept here)."""
    parts = route.split("/")
    registered = {(m._meta.app_label, m._meta.model_name) for m in admin.site._registry}
    return entry.name is None and len(parts) == 5 and (parts[1], parts[2]) in registered and parts[3].startswith("<")


def test_every_served_url_is_swept_or_listed_with_why() -> None:
    """Found: the sweeps under tests/tenancy each walked their part (admin pages, API GET and POST) and nothing said
    that every served pattern belonged to one; an API method other than GET/POST (an agent's PATCH), the bare
    ``<id>/`` redirects and the API's schema pages were swept by none.
    Expect: each served pattern is an admin page of a registered ModelAdmin (or one it adds), an API route (all of
    its methods swept here), a documentation page read here, or listed in ``NOT_SWEPT``/``BUILT_IN`` with why.
    """
    from toolhub import asgi

    assert asgi.MCP_PATH in ASGI_MOUNTS, f"the ASGI app mounts {asgi.MCP_PATH}: say where it is swept"
    model_routes, custom = _admin_model_routes(), set(_custom_admin_routes())
    unaccounted, api_routes, redirects = [], 0, 0
    for route, entry in _patterns():
        if route in NOT_SWEPT or route in API_DOCS:
            continue
        if route.startswith("admin/"):
            if entry.name in BUILT_IN_WHY or entry.name in model_routes or entry.name in custom:
                continue
            if _redirect_to_change(route, entry):
                redirects += 1
                continue
        elif route.startswith(API) and entry.name and _view_methods(entry):
            api_routes += 1
            continue
        unaccounted.append(f"{route} ({entry.name}): sweep it against another tenant's rows or list it with why")
    assert unaccounted == []
    assert redirects == len(admin.site._registry)
    assert api_routes == len(set(api_get_routes()) | set(api_post_routes()))
    assert not [route for route in NOT_SWEPT if route not in {r for r, _ in _patterns()}], "a listed page is gone"


def _token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key_issue(user)}")
    return client


def _answer(response: Any, asked: tuple[str, str] | None = None) -> tuple[int, str, bytes]:
    """Status, redirect and body; ``asked`` swaps the value the request named for another where the body repeats it
    (a tenant refused by name, review 2026-12-07 r: the caller's own words, not a row's)."""
    content = response.content
    if asked is not None:
        content = content.replace(asked[0].encode(), asked[1].encode())
    return response.status_code, response.get("Location") or "", content


def test_no_api_method_tells_another_tenants_row_from_a_missing_one(
    acme: AcmeData,
    acme_agent: Agent,  # noqa: F811 - the fixture imported above
    globex_operator: User,
    globex_auditor: User,
    globex_user: User,
) -> None:
    """Found: (held) the API sweep read rows with GET and acted with POST only, through forced logins.
    Expect: through real API tokens of globex's operator, auditor and member, every method every row route's view
    answers gives for acme's row exactly the answer for a missing row (403 or 404), names nothing of acme and changes
    nothing; every list filtered through related fields naming acme answers as the filter naming nothing does.
    """
    parameters, markers = _parameters(acme, acme_agent), _markers(acme, acme_agent)
    routes = [(route, entry) for route, entry in _patterns() if route.startswith(API)]
    assert any("patch" in _view_methods(entry) for _, entry in routes)  # a method beyond GET/POST is swept
    before = database_state()
    agent_before = Agent.objects.filter(pk=acme_agent.pk).values().get()
    for who in (globex_operator, globex_auditor, globex_user):
        client = _token_client(who)
        for route, entry in routes:
            resource = route.split("/")[2]
            if "<" not in route:
                if "get" not in _view_methods(entry):
                    continue
                for name, theirs, nothing in RELATED_FILTERS:
                    named = client.get(f"/{route}", {name: theirs})
                    missing = client.get(f"/{route}", {name: nothing})
                    assert _answer(named) == _answer(missing, (nothing, theirs)), (who.username, route, name)
                    assert not [m for m in markers if m in named.content.decode()], (who.username, route, name)
                continue
            assert resource in parameters, f"{route}: add the resource {resource!r} to tests/tenancy/test_api_sweep"
            for method in _view_methods(entry):
                send: Callable[..., Any] = getattr(client, method)
                foreign = send(_fill(route, parameters[resource], 0), BODY, format="json")
                missing = send(_fill(route, parameters[resource], 1), BODY, format="json")
                where = (who.username, method, route)
                if resource == "tools":  # the catalogue: no row of a tenant in the path
                    continue
                assert foreign.status_code in (403, 404), (*where, foreign.status_code, foreign.content[:200])
                assert _answer(foreign) == _answer(missing), where
                assert not [m for m in markers if m in foreign.content.decode()], where
    assert database_state() == before
    assert Agent.objects.filter(pk=acme_agent.pk).values().get() == agent_before


def test_the_api_documentation_names_no_row_of_any_tenant(
    acme: AcmeData,
    acme_agent: Agent,  # noqa: F811 - the fixture imported above
    globex_operator: User,
) -> None:
    """Found: (held) the schema and its browsable page were in no sweep.
    Expect: they are drawn from the code: nothing of acme's rows in them, for a member of another tenant.
    """
    client = console(globex_operator)
    for route in API_DOCS:
        response = client.get(f"/{route}")
        assert response.status_code in (200, 302, 403, 404), (route, response.status_code)
        assert not [m for m in _markers(acme, acme_agent) if m in response.content.decode(errors="replace")], route


def _messages(response: Any) -> list[str]:
    """The messages this request added (not ones an earlier, unfollowed redirect left in the session)."""
    return [str(message) for message in getattr(get_messages(response.wsgi_request), "_queued_messages", [])]


def _page(response: Any) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode(errors="replace")


def _same_answer(client: Client, method: str, theirs: str, missing: str, ids: tuple[str, str]) -> int:
    """``theirs`` answers as ``missing`` does: status, where it goes, the page and its messages (ids swapped)."""
    foreign = getattr(client, method)(theirs, BODY)
    absent = getattr(client, method)(missing, BODY)
    swap: Callable[[str], str] = lambda text: text.replace(ids[1], ids[0])  # noqa: E731
    where = (method, theirs)
    assert foreign.status_code == absent.status_code, (*where, foreign.status_code, absent.status_code)
    assert (foreign.get("Location") or "") == swap(absent.get("Location") or ""), where
    assert _page(foreign) == swap(_page(absent)), where
    assert _messages(foreign) == [swap(text) for text in _messages(absent)], where
    return len(_messages(foreign))


def _listed(client: Client, url: str, query: dict[str, str]) -> tuple[Any, ...]:
    """What a change list answers: status, where it redirects, the rows listed and both counts."""
    response = client.get(url, query)
    if response.status_code != 200 or response.context is None or "cl" not in response.context:
        return response.status_code, response.get("Location") or "", _page(response)
    changelist = response.context["cl"]
    rows = sorted(str(row.pk) for row in changelist.result_list)
    return response.status_code, rows, changelist.result_count, changelist.full_result_count


def _changelist_pairs(model: type[Model], tenant_field: str, pks: list[str]) -> list[tuple[dict[str, str], ...]]:
    """Filters and searches naming acme (first) beside the same naming nothing (second)."""
    pairs = [
        ({f"{tenant_field}{suffix}": "acme"}, {f"{tenant_field}{suffix}": "nope"})
        for suffix in ("", "__exact", "__in", "__iexact", "__startswith")
    ]
    pairs += [({"tenant__name": "ACME Corp"}, {"tenant__name": "Nope Corp"})]
    pairs += [({"tenant__slug": "acme"}, {"tenant__slug": "nope"})]
    pairs += [({"q": pks[0]}, {"q": _missing(model)}), ({"q": "ACME Corp"}, {"q": "Nope Corp"})]
    pairs += [({"pk": pks[0]}, {"pk": _missing(model)}), ({"pk__in": pks[0]}, {"pk__in": _missing(model)})]
    return pairs


def _add_pages_offer_nothing_of_acme(who: User, rows: dict[type[Model], list[str]]) -> int:
    """Every registered admin's add page (swept nowhere else): refused, or a form whose choices are the viewer's.

    No select offers a tenant the viewer is not in, nor a row of acme; the page names no acme row's id.
    Answers how many add forms were drawn. A fresh session: the pages swept before left messages quoting the ids
    the viewer typed, which the next page drawn shows.
    """
    client = console(who)
    theirs = {pk for pks in rows.values() for pk in pks if len(pk) == 36}
    own = set(TenantMembership.objects.filter(user=who).values_list("tenant__slug", flat=True))
    drawn = 0
    for model in admin.site._registry:
        response = client.get(_url(model, "add"))
        assert response.status_code in (200, 302, 403), (who.username, model._meta.label, response.status_code)
        if response.status_code != 200:
            continue
        drawn += 1
        assert not [pk for pk in theirs if pk in _page(response)], (who.username, model._meta.label)
        for name, field in response.context["adminform"].form.fields.items():
            choices = getattr(field, "queryset", None)
            if choices is None:
                continue
            offered = {str(pk) for pk in choices.values_list("pk", flat=True)}
            assert not offered & set(rows.get(choices.model, [])), (who.username, model._meta.label, name)
            if choices.model is Tenant:
                slugs = set(choices.values_list("slug", flat=True))
                assert slugs <= own, (who.username, model._meta.label, name, slugs)
    return drawn


def test_no_admin_page_tells_another_tenants_row_or_tenant_from_a_missing_one(
    acme: AcmeData,
    acme_everywhere: dict[type[Model], list[str]],  # noqa: F811 - the fixture imported above
    globex_operator: User,
    globex_auditor: User,
    globex_developer: User,
    tenantless_staff: User,  # noqa: F811 - the fixture imported above
) -> None:
    """Found: (held) the admin sweep asked only that an acme row's change/history/delete page be refused, not that
    it answer as a missing row's does; it read change lists filtered by nothing of acme's, and the exports' and
    "verify now"'s tenant field was never set to acme.
    Expect: for every tenant-scoped admin, acme's row answers as a missing id on each per-row page (read and
    posted, the bare ``<id>/`` redirect too); a change list filtered through the tenant field, ``tenant__name``,
    ``tenant__slug``, ``pk`` or searched for an acme id lists and counts what the filter naming nothing does; the
    calls export filtered toward acme is empty and the trail export and verify naming acme answer as a missing
    tenant; an add page offers no other tenant nor acme's rows. Nothing changes.
    """
    before = {key: value for key, value in database_state().items() if key != "audit_events"}
    told, listed, offered = 0, 0, 0
    for who in (globex_operator, globex_auditor, globex_developer, tenantless_staff):
        client = console(who)
        for model, pks in acme_everywhere.items():
            missing = _missing(model)
            for view in ("change", "history", "delete"):
                for method in ("get", "post"):
                    told += _same_answer(
                        client, method, _url(model, view, pks[0]), _url(model, view, missing), (pks[0], missing)
                    )
            bare = _url(model, "change", pks[0]).removesuffix("change/")
            _same_answer(client, "get", bare, bare.replace(pks[0], missing), (pks[0], missing))
            tenant_field = admin.site._registry[model].tenant_field
            changelist = _url(model, "changelist")
            for theirs, nothing in _changelist_pairs(model, tenant_field, pks):
                named, absent = _listed(client, changelist, theirs), _listed(client, changelist, nothing)
                assert named == absent, (who.username, model._meta.label, theirs, named, absent)
                listed += isinstance(named[1], list)
        offered += _add_pages_offer_nothing_of_acme(who, acme_everywhere)
        for spelling in ("acme", "ACME", " acme ", "acme\u200b"):
            for page in ("/admin/toolhub/toolcall/verify/", "/admin/toolhub/toolcall/export-trail/"):
                named, absent = client.post(page, {"tenant": spelling}), client.post(page, {"tenant": "nope"})
                assert _answer(named) == _answer(absent), (who.username, page, spelling)
        for export_format in EXPORT_FORMATS:
            export = _url(next(m for m in acme_everywhere if m._meta.model_name == "toolcall"), "changelist")
            for query in (
                "tenant__exact=acme",
                "tenant=acme",
                f"run_id={acme.ledger_run.id}",
                f"q={acme.artifact_call.id}",
            ):
                response = client.post(f"{export}export/{export_format}/?{query}")
                assert response.status_code in (200, 302, 403), (who.username, query, response.status_code)
                text = _page(response)
                assert not [pk for pks in acme_everywhere.values() for pk in pks if len(pk) == 36 and pk in text]
    assert told and listed and offered  # the pages answered: messages compared, lists read, add forms drawn
    assert {key: value for key, value in database_state().items() if key != "audit_events"} == before
