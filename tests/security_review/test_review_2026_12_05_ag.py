"""Review of 2026-12-05 (ag): the tenant boundary and the four-eyes rule, attacked black-box by people with real
accounts (two tenants; operator, approver, auditor, developer, plain member, staff with no tenant, a member of both),
through what the last two sessions added (audit export, login attempts, lockout pages, token expiry, stale-edit
protection, visible text, the desk's ``fields_version``, the saga Retry binding) and the admin's query parameters.

Each test fails on the reviewed code (main at 6b7a75b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. An editable list (``list_editable``: approval rules' enabled and priority) told whether an id exists in another
   tenant: Django's changelist formset checks each posted row id against every row of the model
   (``_default_manager``), not the rows the viewer sees, so another tenant's id passed validation, was taken for a new
   row and answered 400 ("list_editable does not allow adding"), while a missing id answered the list with "Select a
   valid choice". Rule ids are sequential: a tenant's developer counted and dated the other tenants' rules. Now
   :class:`toolhub.admin_helpers.TenantScopedAdmin` checks a posted row id against the rows it shows, so another
   tenant's id answers exactly as a missing one (nothing saved either way).

Checked and found holding (probes run, no test here): for globex's auditor, operator and developer and a staff user
with no tenant, every tenant-scoped change list with ``?<tenant_field>=acme``, ``__exact``, ``__in``, ``?o=-1``,
``?o=1.2.3``, ``?e=1``, ``?_popup=1&_to_field=<pk>`` with a tenant filter, ``?_changelist_filters=``, ``?q=<acme pk>``
and ``?<pk>=<acme pk>`` / ``__in`` listed none of acme's rows (a refused lookup answers 400 or the ``?e=1`` redirect);
change, history and delete pages of acme's rows with ``?_to_field=<pk>``, ``?_popup=1`` or ``_changelist_filters``
answered 302/403/404; every action posted with ``select_across=1`` under ``?<tenant_field>=acme`` with acme's ids
changed nothing, and every action (its first POST and its confirmed one), change, delete and history POST naming an
acme row answered exactly as one naming a missing id (status, page and messages); an add page's foreign key set to a
row of acme answered "Select a valid choice" as a missing one does; ``/admin/autocomplete/`` asked from every
installed model (registered or not: Django does not need the source model to be registered) named none of acme's
rows; the admin's query counts on PostgreSQL are unchanged by the fix (tests/posture/test_admin_query_counts.py).
An operator who is a member of both tenants, posting approvals of their own held call (acme) on the desk's page,
through "Approve selected" and through ``POST /api/v1/approvals/<id>/approve/`` (403, "You started this call"), left
it pending with no decision recorded.

Read in the code, not probed: the password-change page of an acme user answers 403 as a missing one does
(``CrossTenantChangesOnly`` refuses before the row is read). The console's trail export and "Verify now" take the
tenant from the POST body and refuse one outside the boundary with 404 (the empty tenant of the tenantless too). Four
eyes: the desk's single approve, "Approve selected", the REST approve and reject all go through
``approvals.services._decided``, which judges the decider (``approval_may_decide``: the requester refused, whatever
tenant the request is in, so a member of both tenants too) after the row lock and reloads them (``decider_as_now``);
MCP has no decision tool (tests/approvals/test_four_eyes.py and tests/api hold the requester's refusal). A run's
tenant (``context.tenant``) is one of the caller's own (``_run_tenant``), MCP's ``X-Toolhub-Tenant`` likewise
(tests/tenancy/test_mcp_sweep.py). The bulk approve's ``fields_version_<id>`` and ``arguments_hash_<id>`` are read only
for requests of the action's (scoped) queryset; the saga page's Retry ``seen`` marks are compared with the saga's own
compensations under its lock. The changelist's ``?_to_field`` and raw-id popups read the admin's scoped queryset.

Noted, not changed: "Approve selected" posted without ``fields_version_<id>`` (a script's own form) approves without
the definition check (``definition_changed`` reads an empty value as "not sent"), as the API does without
``round``/``expected_arguments_hash``; the desk's "May still approve" names platform operators (cross-tenant holders) to
a tenant's staff.
"""

import re
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import Model

from tests.helpers import console
from tests.tenancy.conftest import database_state
from tests.tenancy.test_admin_sweep import _missing, _url, acme_everywhere  # noqa: F401 - a fixture, registered here
from toolhub.admin_helpers import TenantScopedAdmin

pytestmark = pytest.mark.django_db(transaction=True)


def _edit_of(model: type[Model], editable: tuple[str, ...], row: Model, pk: str) -> dict[str, str]:
    """A list's POST changing ``row``'s editable values, naming it by ``pk``."""
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        f"form-0-{model._meta.pk.name}": pk,
        "_save": "Save",
    }
    for name in editable:
        value = getattr(row, model._meta.get_field(name).attname)
        if isinstance(value, bool):
            if not value:
                data[f"form-0-{name}"] = "on"
        elif isinstance(value, int):
            data[f"form-0-{name}"] = str(value + 1)
        elif value is not None:
            data[f"form-0-{name}"] = str(value)
    return data


def _page(response: Any, pk: str) -> str:
    """A page's text with the row id it was posted with, and its per-response CSRF token, left out."""
    text = response.content.decode().replace(f'-id" value="{pk}"', '-id" value="ID"')
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", text)


def test_an_editable_list_answers_another_tenants_id_as_a_missing_one(
    request: pytest.FixtureRequest, globex_developer: User
) -> None:
    """Found: a list's POST naming another tenant's row id answered 400 ("does not allow adding"), a missing id the list
    with "Select a valid choice": the formset checked ids against every row of the model. Expect: the same answer
    for both, and nothing saved."""
    # given a developer of globex, who may edit approval rules of their own tenant, and rows of acme everywhere
    rows: dict[type[Model], list[str]] = request.getfixturevalue("acme_everywhere")
    client = console(globex_developer)
    before = database_state()
    tried = []
    for model, pks in rows.items():
        ma = admin.site._registry[model]
        if not isinstance(ma, TenantScopedAdmin):
            continue
        changelist = _url(model, "changelist")
        page = client.get(changelist)
        if page.status_code != 200 or not page.context["cl"].list_editable:
            continue
        tried.append(model._meta.label)
        row, missing = model._default_manager.get(pk=pks[0]), _missing(model)
        editable = tuple(page.context["cl"].list_editable)
        # when they post an edit naming acme's row, then one naming no row
        theirs = client.post(changelist, _edit_of(model, editable, row, pks[0]))
        unknown = client.post(changelist, _edit_of(model, editable, row, missing))
        # then both answer alike
        assert theirs.status_code == unknown.status_code, (model._meta.label, theirs.status_code, unknown.status_code)
        assert theirs.context["cl"].formset.errors == unknown.context["cl"].formset.errors
        assert _page(theirs, pks[0]) == _page(unknown, missing)
    assert tried, "no editable list was reached"
    assert database_state() == before
