"""Probe of 2026-12-04 (second pass): the admin's query-string lookups and the published approval hash.

Django's admin filters a list by any lookup on the model's own columns named in the URL, and whether the
list comes back empty answers a question: a sensitive argument spelled out with ``__startswith``, another
tenant's part of a shared tool group, an event's place in a shared chain. And an approval's binding hash,
published to auditors, in the trail and in webhooks, was a plain SHA-256 over arguments whose sensitive
values the pages withhold: a short one (a PIN) fell to 10,000 guesses. Each test is the probe's attack,
now refused, beside what must keep working.
"""

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import JSONField
from django.test import Client
from django.utils import timezone

from tests.helpers import console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub import Param, Risk, registry, tool
from toolhub.admin_helpers import GuardedLookups
from toolhub.models import AuditEvent, ToolGroup

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-probe-04b-hidden-9c1e"


@tool(sensitive=("api_token",))
def probe_04b_lookup(
    customer: Annotated[str, Param("The customer.")],
    api_token: Annotated[str, Param("The CRM token.")],
) -> dict:
    """Look a customer up in the CRM with a token."""
    return {"customer": customer}


@tool(sensitive=("api_token",), risk=Risk.HIGH)
def probe_04b_held_lookup(
    customer: Annotated[str, Param("The customer.")],
    api_token: Annotated[str, Param("The CRM token.")],
) -> dict:
    """Look a customer up in the CRM with a token; held for an operator."""
    return {"customer": customer}


@pytest.fixture
def acme_auditor(tenant: Any, roles: Any) -> User:
    """acme's auditor: reads every row of acme, sensitive values redacted, changes nothing."""
    return make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],))


@pytest.fixture
def probe_tools() -> Iterator[None]:
    with registry.temporarily(probe_04b_lookup, probe_04b_held_lookup):
        yield


def _refused(page: Client, url: str) -> bool:
    """Whether the list refuses the URL's lookup (400, nothing listed), as Django refuses one it does not allow."""
    response = page.get(url)
    assert response.status_code in (200, 400), (url, response.status_code)
    return response.status_code == 400


def _listed(page: Client, url: str) -> int:
    response = page.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(response.context["cl"].result_list)


def test_the_call_list_and_its_export_refuse_a_lookup_into_the_arguments(
    probe_tools: None, alice: User, acme_auditor: User
) -> None:
    """``?arguments__api_token__startswith=<guess>`` spelled alice's token out one character at a time."""
    made = client_for(alice).post(
        "/api/v1/calls/",
        {"tool": "probe_04b_lookup", "arguments": {"customer": "ada", "api_token": SECRET}},
        format="json",
    )
    assert made.status_code == 200, made.content
    page = console(acme_auditor)
    assert SECRET not in page.get(f"/admin/toolhub/toolcall/{made.json()['id']}/change/").content.decode()

    for lookup in ("arguments__api_token__startswith=sk-", f"arguments__api_token={SECRET}", "context__user=alice"):
        assert _refused(page, f"/admin/toolhub/toolcall/?{lookup}"), lookup
        export = page.post(f"/admin/toolhub/toolcall/export/csv/?{lookup}")
        assert export.status_code == 400 and SECRET not in export.content.decode(), lookup

    # The list's own filters and the links other pages make still filter.
    assert _listed(page, "/admin/toolhub/toolcall/?status__exact=succeeded") == 1
    assert _listed(page, "/admin/toolhub/toolcall/?tool_name=probe_04b_lookup") == 1
    assert _listed(page, "/admin/toolhub/toolcall/?tool_name=nothing") == 0


def test_the_approval_desk_refuses_a_lookup_into_the_arguments(
    probe_tools: None, alice: User, acme_operator: User
) -> None:
    """``?status=all&original_arguments__api_token=<guess>`` confirmed a guess of the withheld value."""
    held = client_for(alice).post(
        "/api/v1/calls/",
        {"tool": "probe_04b_held_lookup", "arguments": {"customer": "ada", "api_token": SECRET}},
        format="json",
    )
    assert held.status_code == 202, held.content
    page = console(acme_operator)
    desk = "/admin/approvals/approvalrequest/?status=all"

    assert _refused(page, f"{desk}&original_arguments__api_token={SECRET}")
    assert _refused(page, f"{desk}&arguments__api_token__startswith=sk-p")
    assert _listed(page, f"{desk}&risk__exact=high") == 1  # a declared filter still filters


def test_the_event_list_refuses_to_filter_tenant_staff_by_a_place_in_a_shared_chain(
    tenant: Any, acme_auditor: User, superuser: User
) -> None:
    """``?chain=3&seq__lte=N`` bisected the place of acme's event in a shared chain, which the pages leave out."""
    AuditEvent.objects.create(
        chain=3, seq=41, event_type="call.requested", tenant="acme", actor="old", data="{}", created_at=timezone.now()
    )
    page = console(acme_auditor)
    assert _refused(page, "/admin/toolhub/auditevent/?chain=3&seq__lte=50")
    assert _refused(page, "/admin/toolhub/auditevent/?seq=41")
    assert _listed(page, "/admin/toolhub/auditevent/?actor=old") == 1

    # Who crosses tenants sees every place, and may filter by it.
    assert _listed(console(superuser), "/admin/toolhub/auditevent/?chain=3&seq__lte=50") == 1


def test_a_shared_groups_stored_rules_answer_no_filter(tenant: Any, roles: Any) -> None:
    """acme's staff read the group ``reports`` with its rules cut to acme's part; ``?activation_rules__icontains``
    searched the stored rules, globex's included, and spelled ``globex-treasury`` out."""
    ToolGroup.objects.create(
        name="reports",
        activation_rules=[{"tenants": ["globex", "acme"]}, {"tenants": ["globex"], "agents": ["globex-treasury"]}],
    )
    page = console(make_user("acme-auditor2", tenant=tenant, staff=True, groups=(roles["auditors"],)))
    assert "globex" not in page.get("/admin/toolhub/toolgroup/").content.decode()

    assert _refused(page, "/admin/toolhub/toolgroup/?activation_rules__icontains=globex-t")
    assert _listed(page, "/admin/toolhub/toolgroup/?name=reports") == 1


def test_every_admin_refuses_a_lookup_into_any_json_column(superuser: User) -> None:
    """By construction: every page registered in the console (superusers' included: sensitive values are
    withheld from them too) refuses a query-string lookup into each JSON column of its model."""
    found = 0
    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, GuardedLookups), f"{type(model_admin).__name__} filters by any column"
        for field in model._meta.get_fields():
            if isinstance(field, JSONField):
                found += 1
                request = Client().request().wsgi_request
                request.user = superuser
                assert not model_admin.lookup_allowed(f"{field.name}__key__startswith", "x", request), (
                    model.__name__,
                    field.name,
                )
    assert found >= 20  # the calls', requests', runs', groups' and the others' JSON columns were all asked


def test_a_member_reads_no_event_id_that_counts_other_tenants_events(
    request_call: Any, alice: User, globex_user: User, acme_operator: User
) -> None:
    """Event ids are one counter for every tenant: the gap between two of alice's events counted globex's
    events in between. alice (no tenant-wide role) now reads no id, as she reads no hash; staff still do
    (they see ids in the admin's addresses: README, "The audit console", a known limit)."""
    first = request_call("record_effect", {"note": "before"}, alice, tenant="acme")
    request_call("record_effect", {"note": "globex"}, globex_user, tenant="globex")
    second = request_call("record_effect", {"note": "after"}, alice, tenant="acme")

    for call in (first, second):
        events = client_for(alice).get(f"/api/v1/calls/{call.pk}/").json()["audit_events"]
        assert events and all(event["id"] is None for event in events)
        staff_view = client_for(acme_operator).get(f"/api/v1/calls/{call.pk}/").json()["audit_events"]
        assert all(isinstance(event["id"], int) for event in staff_view)
