"""Every registered admin, swept by construction: nothing of acme reaches globex's people or a user with no tenant.

The sweep walks ``admin.site._registry`` (not a list of models someone remembered): every admin must say how it is
scoped (:class:`TenantScopedAdmin`, :class:`CrossTenantOnly`, :class:`CrossTenantChangesOnly`), and every
tenant-scoped one must have a row maker (``ROWS`` of tests/posture/test_admin_query_counts.py), or the sweep fails
naming it. acme gets rows of every tenant-scoped admin; then globex's staff, operator, auditor, developer and plain
member, and a staff user with no tenant, open each change list (plain, searched, as a raw-id popup, drilled into
a date), read each field filter's choices, open each acme row's change, history and delete pages, run each admin
action on acme's rows, and ask every autocomplete: nothing of acme may show, nothing may change.
"""

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests.helpers import RequestCall, console
from tests.posture.test_admin_query_counts import ROWS, World
from tests.tenancy.conftest import AcmeData, database_state, make_user, random_uuid
from toolhub.admin_helpers import CrossTenantChangesOnly, CrossTenantOnly, TenantScopedAdmin
from toolhub.exports import EXPORT_FORMATS
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)

SCOPINGS = (TenantScopedAdmin, CrossTenantOnly, CrossTenantChangesOnly)
PEOPLE = ("globex_auditor", "globex_operator", "globex_developer", "globex_user", "tenantless_staff")


def _scoped_admins() -> dict[type[Model], TenantScopedAdmin]:
    return {model: ma for model, ma in admin.site._registry.items() if isinstance(ma, TenantScopedAdmin)}


def test_every_registered_admin_says_how_it_is_scoped() -> None:
    unscoped = [
        f"{model._meta.label} ({type(ma).__name__}): mix in TenantScopedAdmin (with its tenant_field), "
        "CrossTenantOnly or CrossTenantChangesOnly from toolhub.admin_helpers"
        for model, ma in admin.site._registry.items()
        if not isinstance(ma, SCOPINGS)
    ]
    assert unscoped == []
    for model, ma in _scoped_admins().items():
        model._default_manager.filter(**{ma.tenant_field: "acme"}).exists()  # the path resolves
    missing = sorted(m._meta.label for m in _scoped_admins() if m not in ROWS)
    assert missing == [], "add a row maker to ROWS in tests/posture/test_admin_query_counts.py"


@pytest.fixture
def tenantless_staff(roles: dict[str, Group]) -> User:
    """Staff holding every role's permissions but no tenant: sees no tenant's rows."""
    return make_user("nobody-staff", staff=True, groups=tuple(roles.values()))


def rows_everywhere(world: World, index: int) -> dict[type[Model], list[str]]:
    """Rows of ``world.tenant`` in every tenant-scoped admin (made with ``index``), their primary keys by model."""
    for make in {ROWS[model] for model in _scoped_admins()}:  # one maker may serve two admins (users, members)
        make(world, index)
    rows = {}
    for model, ma in _scoped_admins().items():
        scoped = model._default_manager.filter(**{ma.tenant_field: world.tenant.slug})
        pks = [str(pk) for pk in scoped.values_list("pk", flat=True)]
        assert pks, f"{model._meta.label}: the row maker made no row of {world.tenant.slug}"
        rows[model] = pks
    return rows


@pytest.fixture
def acme_everywhere(
    acme: AcmeData, tenant: Tenant, alice: User, acme_operator: User, request_call: RequestCall, committed: Any
) -> dict[type[Model], list[str]]:
    """Rows of acme in every tenant-scoped admin, and their primary keys by model."""
    world = World(tenant=tenant, alice=alice, staff=acme_operator, request_call=request_call, committed=committed)
    return rows_everywhere(world, 900)


def _url(model: type[Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _visible(ma: Any, request: Any, path: str, relation: bool) -> set[str]:
    values = ma.get_queryset(request).values_list(f"{path}__pk" if relation else path, flat=True)
    return {str(value) for value in values}


def _leaks_in_filters(response: Any, ma: Any) -> list[Any]:
    """Field filter choices not found among the rows the viewer sees, and any filter naming acme."""
    leaks: list[Any] = []
    changelist = response.context["cl"]
    for spec in changelist.filter_specs:
        shown = [str(choice.get("display", "")) for choice in spec.choices(changelist)]
        leaks += [(spec.title, label) for label in shown if "acme" in label.lower()]
        path = getattr(spec, "field_path", None)
        choices = getattr(spec, "lookup_choices", None)
        if path is None or choices is None:
            continue
        relation = bool(getattr(spec.field, "is_relation", False))
        visible = _visible(ma, response.wsgi_request, path, relation)
        keys = [str(choice[0] if isinstance(choice, (list, tuple)) else choice) for choice in choices]
        leaks += [(path, key) for key in keys if key not in visible and key != "None"]
    return leaks


@pytest.mark.parametrize("who", PEOPLE)
def test_no_page_of_any_admin_shows_or_acts_on_a_row_of_another_tenant(
    who: str, acme_everywhere: dict[type[Model], list[str]], request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(who)
    client = console(user)
    before = database_state()
    answered = 0
    for model, pks in acme_everywhere.items():
        ma = admin.site._registry[model]
        label = model._meta.label
        changelist = _url(model, "changelist")
        for query in ("", "?q=acme", "?q=alice", "?_popup=1&_to_field=id", "?all=", "?_facets=1"):
            response = client.get(changelist + query)
            if response.status_code != 200:
                assert response.status_code in (302, 400, 403), (label, query, response.status_code)
                continue
            answered += 1
            listed = {str(row.pk) for row in response.context["cl"].result_list}
            assert not listed & set(pks), (label, query)
            assert not _leaks_in_filters(response, ma), (label, query, _leaks_in_filters(response, ma))
            hierarchy = response.context["cl"].date_hierarchy
            if hierarchy and not query:
                dates = model._default_manager.filter(pk__in=pks).dates(hierarchy, "day")
                for day in dates[:1]:
                    drilled = client.get(
                        f"{changelist}?{hierarchy}__year={day.year}&{hierarchy}__month={day.month}"
                        f"&{hierarchy}__day={day.day}"
                    )
                    assert not {str(r.pk) for r in drilled.context["cl"].result_list} & set(pks), label
        for pk in pks[:3]:
            for view in ("change", "history", "delete"):
                response = client.get(_url(model, view, pk))
                assert response.status_code in (302, 403, 404), (label, view, response.status_code)
        request_for_actions = client.get(changelist)
        if request_for_actions.status_code == 200:
            actions = ma.get_actions(request_for_actions.wsgi_request)
            for action in actions:
                client.post(changelist, {"action": action, "_selected_action": pks, "apply": "1", "post": "yes"})
    assert answered or not user.is_staff  # staff did read change lists: the sweep reached the pages
    assert database_state() == before
    for model, pks in acme_everywhere.items():
        assert sorted(
            str(pk) for pk in model._default_manager.filter(pk__in=pks).values_list("pk", flat=True)
        ) == sorted(pks), model._meta.label


def _autocomplete_sources() -> list[tuple[str, str, str, Any]]:
    sources: list[tuple[str, str, str, Any]] = []
    for model in admin.site._registry:
        for field in model._meta.get_fields():
            remote = getattr(getattr(field, "remote_field", None), "model", None)
            if field.concrete and remote in admin.site._registry:
                sources.append((model._meta.app_label, str(model._meta.model_name), str(field.name), remote))
    return sources


@pytest.mark.parametrize("who", PEOPLE)
def test_no_autocomplete_names_a_row_of_another_tenant(
    who: str, acme_everywhere: dict[type[Model], list[str]], request: pytest.FixtureRequest
) -> None:
    client: Client = console(request.getfixturevalue(who))
    for app_label, model_name, field_name, remote in _autocomplete_sources():
        theirs = set(acme_everywhere.get(remote, []))
        for term in ("", "a", "acme", "alice"):
            response = client.get(
                "/admin/autocomplete/",
                {"app_label": app_label, "model_name": model_name, "field_name": field_name, "term": term},
            )
            if response.status_code != 200:
                assert response.status_code in (302, 403, 404), (
                    app_label,
                    model_name,
                    field_name,
                    response.status_code,
                )
                continue
            named = {str(item["id"]) for item in response.json()["results"]}
            # (names are not compared: acme's fixture agents are global ones, which everyone sees)
            assert not named & theirs, (app_label, model_name, field_name, term)


#: Django's own admin pages, which read no tenant's rows (autocomplete is swept above).
BUILT_IN = {"index", "login", "logout", "password_change", "password_change_done", "autocomplete", "jsi18n"}
BUILT_IN |= {"app_list", "auth_user_password_change"}
STANDARD = ("_changelist", "_add", "_change", "_delete", "_history")
#: Values of the custom pages' path parameters that name no row.
PATH_VALUES = {"export_format": sorted(EXPORT_FORMATS)}


def _custom_admin_routes() -> dict[str, str]:
    """Every named admin page a ModelAdmin adds besides Django's standard ones (exports, verify, decisions, retry)."""
    routes: dict[str, str] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern) and entry.name and prefix.startswith("admin/"):
                if entry.name not in BUILT_IN and not entry.name.endswith(STANDARD):
                    routes[entry.name] = prefix + str(entry.pattern)

    walk(get_resolver().url_patterns, "")
    return routes


def _missing(model: type[Model]) -> str:
    return random_uuid() if model._meta.pk.get_internal_type() == "UUIDField" else "987654321"


def _content(response: Any) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode(errors="replace")


@pytest.mark.parametrize("who", PEOPLE)
def test_no_custom_admin_page_shows_or_acts_on_a_row_of_another_tenant(
    who: str, acme_everywhere: dict[type[Model], list[str]], request: pytest.FixtureRequest
) -> None:
    client = console(request.getfixturevalue(who))
    markers = [pk for pks in acme_everywhere.values() for pk in pks if len(pk) == 36]  # acme's uuid ids
    assert markers
    routes = _custom_admin_routes()
    assert {"toolhub_toolcall_export", "approvals_approvalrequest_approve"} <= set(routes)
    before = {key: value for key, value in database_state().items() if key != "audit_events"}
    for name, route in routes.items():
        urls: list[tuple[str, str | None]] = []
        if "<path:content_type_id>" in route:  # Django's "view on site": any row of any model, by content type
            for model, pks in acme_everywhere.items():
                typed = route.replace("<path:content_type_id>", str(ContentType.objects.get_for_model(model).pk))
                urls.append(
                    (
                        "/" + typed.replace("<path:object_id>", pks[0]),
                        "/" + typed.replace("<path:object_id>", _missing(model)),
                    )
                )
        elif "<path:object_id>" in route:
            app_label, model_name = route.split("/")[1:3]
            model = next(
                m for m in admin.site._registry if (m._meta.app_label, m._meta.model_name) == (app_label, model_name)
            )
            assert model in acme_everywhere, f"{name}: {model._meta.label} has no rows of acme to try"
            foreign = "/" + route.replace("<path:object_id>", acme_everywhere[model][0])
            urls.append((foreign, "/" + route.replace("<path:object_id>", _missing(model))))
        else:
            parameters = [part.strip("<>").split(":")[-1] for part in route.split("/") if part.startswith("<")]
            unknown = [p for p in parameters if p not in PATH_VALUES]
            assert not unknown, f"{name}: add values of {unknown} to PATH_VALUES"
            filled = ["/" + route]
            for parameter in parameters:
                filled = [
                    url.replace(f"<str:{parameter}>", value) for url in filled for value in PATH_VALUES[parameter]
                ]
            urls += [(url, None) for url in filled]
        for url, missing_url in urls:
            for method in ("get", "post"):
                response = getattr(client, method)(url, {"comment": "x", "note": "x"})
                text = _content(response)
                assert not [m for m in markers if m in text], (name, method, url)
                if missing_url is not None:
                    other = getattr(client, method)(missing_url, {"comment": "x", "note": "x"})
                    assert response.status_code == other.status_code, (name, method)
                    moved = (other.get("Location") or "").replace(missing_url, url)
                    assert (response.get("Location") or "") == moved, (name, method, url)
                    assert text == _content(other).replace(missing_url, url), (name, method, url)
    assert {key: value for key, value in database_state().items() if key != "audit_events"} == before
