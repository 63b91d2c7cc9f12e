"""Review 2026-12-06 dq: the admin's tenant boundary, every registered admin, systematically.

globex's operator (the operators role plus every view permission of the admin, and for the forms every add and
change one; no cross-tenant permission) walks every admin on ``admin.site`` (toolhub, auth, authtoken, axes,
approvals, agents_app, sagas, mcp_client, the SDK adapter, demo) while acme holds rows of each tenant-scoped model
(the tenancy suite's acme data plus a grant, a rule, a tenant-bound agent, a credential, a paused SDK run, a webhook
delivery, an order) and a user belongs to both tenants. Complements tests/tenancy/test_admin_sweep.py (which checks
listed keys, filter choices, statuses in (302, 403, 404), actions' effects, autocomplete keys, custom routes).

Findings: none. Every probe below passed on the code as found (main at dc76274); they stay as regression guards.

Checked and holding (a test each, unless said):
- Every registered admin applies ``GuardedLookups`` and one scoping (``TenantScopedAdmin``, ``CrossTenantOnly``,
  ``CrossTenantChangesOnly``): no admin escapes the shared mechanism.
- No change list names an acme row (its UUID key, the rule's, the order's or the account's name): plain, as a raw-id
  popup (``?_popup=1&_to_field=id``), searched (``?q=`` alice, acme, the SDK run's key, the credential's variable:
  values held only by acme's rows) and sorted by each column both ways (``?o=N`` and ``?o=-N``).
- An acme row's change, history and delete pages, and Django's ``admin/r/<ct>/<pk>/`` shortcut, answer exactly as a
  key no row holds (same status, same redirect): no existence oracle.
- ``admin/autocomplete/`` for every concrete relation of every admin, terms "", a, acme, alice: no acme key or name.
- Every admin action posted with acme's keys (``_selected_action``, with and without ``post=yes``) names no acme row on
  the page it answers; a ``list_editable`` POST of acme's rule (``form-0-id``) changes nothing and names nothing.
- The index's "recent actions" box and the rule list show no admin log entry written by acme's operator on acme's
  rule (the box lists the viewer's own entries, ``for_user``).
- The change, history and delete pages of every row the viewer sees (its own, the shared ones: roles, catalogue, tool
  groups, global agents, the user of both tenants) name no acme row, nor alice; the shared user's page names no acme
  membership.
- No add or change form, nor an inline of one, offers an acme-only row (or the acme tenant) in a choice field.

Not changed, noted: a delete confirmation page counts related rows the viewer cannot see ("2 agent runs you cannot
see", ``toolhub.admin_deletion``), by design, and only where the deletion is then refused.
"""

import re
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model
from django.test import Client
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from agents_app.services import agent_create
from approvals.models import ApprovalRule, WebhookDelivery
from demo.models import Order
from tests.tenancy.conftest import AcmeData
from toolhub.adapters.openai_agents.models import PausedAgentRun
from toolhub.admin_helpers import TenantScopedAdmin
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer
from toolhub.models import Grant, Tenant, TenantMembership, ToolGroup

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _acme_rows() -> None:
    """acme's rows of the models the tenancy data leaves out."""
    acme = Tenant.objects.get(slug="acme")
    Grant.objects.create(tool_group=ToolGroup.objects.create(name="shared-granted"), tenant=acme)
    ApprovalRule.objects.create(
        name="acme-rule",
        tenant=acme,
        tool_group=ToolGroup.objects.create(name="shared-ruled"),
        argument="amount",
        operator=">",
        value=1000,
    )
    agent_create(name="acme-scoped-agent", tenant="acme", script=[{"content": "hi"}])
    server = RemoteMcpServer.objects.create(name="acme-crm", url="https://crm.acme.example/mcp")
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
    PausedAgentRun.objects.create(
        run_key="acme-sdk-run", tenant="acme", user=User.objects.get(username="alice"), agent_name="sdk-bot", state={}
    )
    WebhookDelivery.objects.create(
        event="approval.requested", payload={"tenant": "acme"}, next_attempt_at=timezone.now()
    )
    Order.objects.create(product="acme widget", amount=Decimal("3"), tenant="acme", created_by="alice")
    both = User.objects.create_user("both-tenants", "both@example.com", is_staff=True)
    for slug in ("acme", "globex"):
        TenantMembership.objects.create(user=both, tenant=Tenant.objects.get(slug=slug))


def _viewer(globex_operator: User) -> Client:
    """globex's operator with every view permission of the admin: what the lists let through is the scope's alone."""
    types = ContentType.objects.get_for_models(*admin.site._registry, for_concrete_models=False).values()
    globex_operator.user_permissions.add(
        *Permission.objects.filter(content_type__in=types, codename__startswith="view_")
    )
    client = Client()
    client.force_login(globex_operator)
    return client


def _acme_of(model: type[Model], model_admin: Any) -> list[Model]:
    """acme's rows of a tenant-scoped admin's model (read unscoped), not globex's too (the user of both tenants)."""
    rows = model._default_manager.filter(**{model_admin.tenant_field: "acme"}).exclude(
        pk__in=model._default_manager.filter(**{model_admin.tenant_field: "globex"}).values("pk")
    )
    return list(rows.distinct()) if "__" in model_admin.tenant_field else list(rows)


def _markers(rows: list[Model]) -> set[str]:
    """What names an acme row on a page: its key when a UUID (integers appear anywhere)."""
    return {str(row.pk) for row in rows if isinstance(row.pk, uuid.UUID)}


def _url(model: type[Model], view: str, *args: Any) -> str | None:
    meta = model._meta
    try:
        return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)
    except NoReverseMatch:
        return None


def _shown(response: Any) -> str:
    return response.content.decode() if hasattr(response, "content") else ""


@pytest.fixture
def walk(acme: AcmeData, globex_operator: User) -> tuple[Client, dict[type[Model], list[Model]]]:
    _acme_rows()
    client = _viewer(globex_operator)
    scoped = {
        model: _acme_of(model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, TenantScopedAdmin)
    }
    assert all(scoped.values()), [model for model, rows in scoped.items() if not rows]
    return client, scoped


def test_each_list_names_no_row_of_another_tenant(walk: Any) -> None:
    """Found: nothing (holds on the code as found).
    Expect: no changelist (plain, popup, searched by an acme key, sorted) shows an acme row's key or alice."""
    client, scoped = walk
    markers = set().union(*(_markers(rows) for rows in scoped.values())) | {"ACC-ACME", "acme-rule", "acme widget"}
    leaks = []
    for model, model_admin in admin.site._registry.items():
        base = _url(model, "changelist")
        queries = ["", "?_popup=1&_to_field=id", "?q=alice", "?q=acme", "?q=acme-sdk-run", "?q=CRM_TOKEN_ACME"]
        queries += [f"?o={sign}{index}" for index in range(1, len(model_admin.list_display) + 1) for sign in ("", "-")]
        for query in queries:
            response = client.get(f"{base}{query}")
            page = _shown(response)
            found = sorted(marker for marker in markers if marker in page)
            if found:
                leaks.append((model._meta.label, query, response.status_code, found[:3]))
    assert not leaks, leaks


def test_another_tenants_rows_answer_as_missing_ones(walk: Any) -> None:
    """Found: nothing (holds on the code as found).
    Expect: an acme row's change, history and delete pages, and the ``r/<ct>/<pk>/`` shortcut, answer as a key
    no row holds (same status, no name)."""
    client, scoped = walk
    differs = []
    for model, rows in scoped.items():
        missing_pk = str(uuid.uuid4()) if isinstance(rows[0].pk, uuid.UUID) else "987654321"
        if model is Tenant:
            missing_pk = "no-such-tenant"
        content_type = ContentType.objects.get_for_model(model, for_concrete_model=False)
        for row in rows:
            for view in ("change", "history", "delete"):
                url, absent = _url(model, view, row.pk), _url(model, view, missing_pk)
                got, expected = client.get(url), client.get(absent)
                if got.status_code != expected.status_code or (got.get("Location") or "") != (
                    expected.get("Location") or ""
                ):
                    differs.append((model._meta.label, view, got.status_code, expected.status_code))
            got = client.get(f"/admin/r/{content_type.pk}/{row.pk}/")
            expected = client.get(f"/admin/r/{content_type.pk}/{missing_pk}/")
            if got.status_code != expected.status_code:
                differs.append((model._meta.label, "shortcut", got.status_code, expected.status_code))
    assert not differs, differs


def test_autocomplete_offers_no_row_of_another_tenant(walk: Any) -> None:
    """Found: nothing (holds on the code as found).
    Expect: ``admin/autocomplete/`` for every foreign key of every admin lists no acme row."""
    client, scoped = walk
    leaks = []
    for model in admin.site._registry:
        for field in model._meta.get_fields():
            if not (field.is_relation and field.concrete and field.related_model in admin.site._registry):
                continue
            for term in ("", "acme", "alice", "a"):
                response = client.get(
                    "/admin/autocomplete/",
                    {
                        "app_label": model._meta.app_label,
                        "model_name": model._meta.model_name,
                        "field_name": field.name,
                        "term": term,
                    },
                )
                if response.status_code != 200:
                    continue
                ids = {item["id"] for item in response.json()["results"]}
                texts = " ".join(item["text"] for item in response.json()["results"])
                related_acme = {str(r.pk) for r in scoped.get(field.related_model, [])}
                if ids & related_acme or re.search(r"\b(acme-rule|alice|ACC-ACME)\b", texts):
                    leaks.append((model._meta.label, field.name, term, sorted(ids & related_acme)[:3], texts[:80]))
    assert not leaks, leaks


def test_actions_and_list_edits_on_another_tenants_keys_show_and_change_nothing(walk: Any) -> None:
    """Found: nothing (holds on the code as found).
    Expect: every action posted with acme's keys, and a list edit of acme's rule, names no acme row and changes none."""
    client, scoped = walk
    markers = set().union(*(_markers(rows) for rows in scoped.values())) | {"ACC-ACME", "acme-rule", "acme widget"}
    leaks = []
    rule = ApprovalRule.objects.get(name="acme-rule")
    for model, rows in scoped.items():
        model_admin = admin.site._registry[model]
        base = _url(model, "changelist")
        listed = client.get(base)
        if listed.status_code != 200:
            continue
        keys = [str(row.pk) for row in rows]
        for action in model_admin.get_actions(listed.wsgi_request):
            for extra in ({}, {"post": "yes"}):
                response = client.post(base, {"action": action, "_selected_action": keys, **extra})
                page = _shown(response)
                found = sorted(marker for marker in markers if marker in page)
                if found:
                    leaks.append((model._meta.label, action, extra, found[:3]))
    edit = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(rule.pk),
        "form-0-enabled": "",
        "form-0-priority": "99",
        "_save": "Save",
    }
    response = client.post(_url(ApprovalRule, "changelist"), edit)
    page = _shown(response)
    rule.refresh_from_db()
    assert rule.enabled and rule.priority != 99
    assert not [marker for marker in markers if marker in page]
    assert not leaks, leaks


def test_the_index_and_histories_name_no_other_tenants_row(walk: Any, acme_operator: User) -> None:
    """Found: nothing (holds on the code as found).
    Expect: acme's operator's admin log entries (on acme's rows) appear on no page of globex's operator."""
    from django.contrib.admin.models import CHANGE, LogEntry

    client, scoped = walk
    rule = ApprovalRule.objects.get(name="acme-rule")
    LogEntry.objects.log_actions(acme_operator.pk, [rule], CHANGE, change_message="acme-secret-change")
    for url in ("/admin/", _url(ApprovalRule, "changelist")):
        page = _shown(client.get(url))
        assert "acme-rule" not in page and "acme-secret-change" not in page, url


def test_pages_of_rows_the_viewer_sees_name_nothing_of_another_tenant(walk: Any, globex_operator: User) -> None:
    """Found: nothing (holds on the code as found).
    Expect: the change, history and delete pages of every row globex's operator sees (its own and the shared ones)
    name no acme row, nor alice."""
    from django.test import RequestFactory

    client, scoped = walk
    markers = set().union(*(_markers(rows) for rows in scoped.values())) | {"acme-rule", "alice"}
    request = RequestFactory().get("/admin/")
    request.user = globex_operator
    leaks = []
    for model, model_admin in admin.site._registry.items():
        if not model_admin.has_view_permission(request):
            continue
        for row in model_admin.get_queryset(request)[:20]:
            for view in ("change", "history", "delete"):
                response = client.get(_url(model, view, row.pk))
                page = _shown(response)
                found = sorted(marker for marker in markers if marker in page)
                if model._meta.model_name == "user":
                    found += re.findall(r".{60}\bacme\b.{60}", page)
                if found:
                    leaks.append((model._meta.label, str(row), view, response.status_code, found[:3]))
    assert not leaks, leaks


def test_no_form_offers_a_row_of_another_tenant(walk: Any, globex_operator: User, roles: Any) -> None:
    """Found: nothing (holds on the code as found).
    Expect: no add or change form (and no inline of one) that globex's operator opens offers an acme row in a
    choice field."""
    from django import forms
    from django.test import RequestFactory

    client, scoped = walk
    globex_operator.user_permissions.add(
        *Permission.objects.filter(codename__regex=r"^(add|change)_").exclude(content_type__app_label="axes")
    )
    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(pk=globex_operator.pk)
    acme_keys = {
        model: {str(row.pk) for row in rows}
        - {str(pk) for pk in admin.site._registry[model].get_queryset(request).values_list("pk", flat=True)}
        for model, rows in scoped.items()
    }  # acme's only: a user of both tenants is globex's too
    acme_keys[Tenant] = {str(Tenant.objects.get(slug="acme").pk)}
    offered = []
    for model, model_admin in admin.site._registry.items():
        urls = [_url(model, "add")] + [_url(model, "change", row.pk) for row in model_admin.get_queryset(request)[:5]]
        for url in urls:
            response = client.get(url)
            if response.status_code != 200 or not response.context or "adminform" not in response.context:
                continue
            formsets = [response.context["adminform"].form]
            formsets += [
                form for inline in response.context.get("inline_admin_formsets", []) for form in inline.formset
            ]
            for form in formsets:
                for name, field in form.fields.items():
                    if not isinstance(field, forms.ModelChoiceField):
                        continue
                    choices: Any = field.queryset
                    keys = acme_keys.get(choices.model, set())
                    shown = {str(pk) for pk in choices.values_list("pk", flat=True)} & keys
                    if shown:
                        offered.append((model._meta.label, str(url).split("/")[-2], name, sorted(shown)[:2]))
    assert not offered, offered


def test_every_admin_applies_the_guarded_lookups_and_a_scope() -> None:
    """Found: nothing (holds on the code as found).
    Expect: every registered admin mixes in ``GuardedLookups`` and a tenant scoping from ``toolhub.admin_helpers``."""
    from toolhub.admin_helpers import CrossTenantChangesOnly, CrossTenantOnly
    from toolhub.admin_lookups import GuardedLookups

    unguarded = [
        model._meta.label
        for model, model_admin in admin.site._registry.items()
        if not isinstance(model_admin, GuardedLookups)
        or not isinstance(model_admin, (TenantScopedAdmin, CrossTenantOnly, CrossTenantChangesOnly))
    ]
    assert unguarded == []
