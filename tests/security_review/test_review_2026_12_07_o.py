"""Admin actions on a MIXED selection (a row of the viewer's tenant beside one of another tenant): review g finished.

Review g (tests/security_review/test_review_2026_12_07_g.py) posted every admin action of every tenant-scoped admin
on acme's rows alone, beside the same action on a missing id. It left the mixed selection: globex's operator,
auditor and developer ticking one of globex's own rows and one of acme's in the same ``_selected_action``. The row
makers of tests/posture/test_admin_query_counts.py made acme's rows only; they now make the rows of
``world.tenant`` (``rows_everywhere`` in tests/tenancy/test_admin_sweep.py, shared by ``acme_everywhere``), so globex
gets a row of every tenant-scoped admin the same way.

Findings: none. Every probe below held on the code as found (BASE 91dbe2c).

Checked and holding:
- Every action of every tenant-scoped admin that globex's operator, auditor or developer is offered (approve and
  reject on the approval desk, saga and compensation retry/resolve, call and run cancel, Django's delete of grants
  and approval rules; the auditor is offered none), posted as an operator runs it (the first post, then the
  confirmation page's own form sent back with a comment, or Django's ``post=yes``) with ``_selected_action`` =
  globex's rows + all of acme's rows answers exactly (status, redirect, page with the CSRF token aside, messages;
  ids swapped) as globex's rows + as many missing ids, asked from the same state inside a transaction rolled back
  afterwards; globex's rows end the same both ways (datetimes aside): handled as usual. The desk's approve and
  reject and a rule's delete acted on globex's rows in the sweep (asserted). Checked to bite: with
  ``CommentActionMixin.response_action`` reading ``_default_manager`` instead of ``get_queryset`` the test fails.
- Nothing of acme changes through the whole sweep: every row of acme of every tenant-scoped admin (calls,
  requests, runs, sagas, compensations, audit events, webhook deliveries, accounts, ledger entries, memberships,
  grants, agents, ...) is read column by column before and after, and no row is added to any of them (so no
  audit event, webhook or decision of acme's).
- ``CommentActionMixin.response_action`` reads the ticked rows again from ``get_queryset`` (tenant-scoped), and
  with ``select_across`` keeps the change list's own (scoped) queryset: acme's row is out before the action runs.
- Not in a tenant-scoped admin, so outside this sweep (g's and gf's tests cover them as refused pages): tool
  enable/disable (``ToolDefinition``, ``CrossTenantChangesOnly``), token actions (``CrossTenantOnly``); the calls'
  exports are pages, not actions (gf's sweep filters them toward acme). The sweep takes about 110 s here, most of
  it the set-up (a row of every admin for two tenants).

Left: globex's saga and compensation rows need no attention, so retry/resolve answered "nothing to do" both ways
and acted on nothing; a failed compensation of globex's would exercise them on a mixed selection.
"""

import datetime
import html
import re
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Model

from approvals.models import ApprovalRequest
from tests.helpers import RequestCall, console
from tests.posture.test_admin_query_counts import World, _held_call
from tests.security_review.test_review_2026_12_07_g import CONFIRM, _drawn
from tests.tenancy.test_admin_sweep import (  # noqa: F401 - fixtures, registered by being imported here
    _missing,
    _scoped_admins,
    _url,
    acme_everywhere,
    rows_everywhere,
)
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def _rows_of(slug: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``slug`` in every tenant-scoped admin, column by column (what an action could change or add)."""
    state = {}
    for model, ma in _scoped_admins().items():
        rows = model._default_manager.filter(**{ma.tenant_field: slug}).order_by("pk").values()
        state[model._meta.label] = [tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows]
    return state


def _rows(model: type[Model], pks: list[str]) -> list[dict[str, Any]]:
    """The rows' columns but their datetimes (set to "now" by an action): what an action made of them."""
    rows = model._default_manager.filter(pk__in=pks).order_by("pk").values()
    return [{k: v for k, v in row.items() if not isinstance(v, datetime.datetime)} for row in rows]


def _swapped(drawn: tuple[Any, ...], swaps: list[tuple[str, str]]) -> tuple[Any, ...]:
    status, location, text, messages = drawn
    for old, new in swaps:
        location, text = location.replace(old, new), text.replace(old, new)
        messages = [m.replace(old, new) for m in messages]
    return status, location, text, messages


def _act(who: User, url: str, action: str, selected: list[str]) -> list[tuple[Any, ...]]:
    """An action as an operator runs it, in a fresh session (a page shows the messages an earlier answer left):
    the first post, then, when it draws a confirmation page, that page's form sent back confirmed (its hidden
    fields, ``CONFIRM``'s comment); else the first post again with ``CONFIRM`` (Django's ``post=yes``)."""
    client = console(who)
    first = client.post(url, {"action": action, "_selected_action": selected})
    drawn = [_drawn(first)]
    hidden = _HIDDEN.findall(drawn[0][2]) if first.status_code == 200 else []
    if any(name == "apply" for name, _ in hidden):
        form: dict[str, list[str]] = {}
        for name, value in hidden:
            form.setdefault(html.unescape(name), []).append(html.unescape(value))
        drawn.append(_drawn(client.post(url, {**CONFIRM, **form})))
    else:
        drawn.append(_drawn(client.post(url, {"action": action, "_selected_action": selected, **CONFIRM})))
    return drawn


_HIDDEN = re.compile(r'<input type="hidden" name="([^"]*)" value="([^"]*)"')


@pytest.fixture
def globex_everywhere(
    acme_everywhere: dict[type[Model], list[str]],  # noqa: F811 - the fixture imported above
    other_tenant: Tenant,
    globex_user: User,
    globex_operator: User,
    request_call: RequestCall,
    committed: Any,
) -> dict[type[Model], list[str]]:
    """Rows of globex in every tenant-scoped admin (acme's are made first), their primary keys by model."""
    world = World(
        tenant=other_tenant, alice=globex_user, staff=globex_operator, request_call=request_call, committed=committed
    )
    rows = rows_everywhere(world, 800)
    _held_call(world, 801)  # a second request waiting: one for approve, one for reject
    rows[ApprovalRequest] = [
        str(pk) for pk in ApprovalRequest.objects.filter(tenant="globex").values_list("pk", flat=True)
    ]
    return rows


def test_a_mixed_selection_acts_on_the_viewers_rows_only_and_answers_as_for_a_missing_row(
    acme_everywhere: dict[type[Model], list[str]],  # noqa: F811 - the fixture imported above
    globex_everywhere: dict[type[Model], list[str]],
    globex_operator: User,
    globex_auditor: User,
    globex_developer: User,
) -> None:
    """Found: (held) review g posted actions on acme's rows alone; a selection holding one of the viewer's own rows
    beside one of acme's was never posted.
    Expect: every action of every tenant-scoped admin, run (first post and confirmation) by globex's operator,
    auditor and developer on globex's rows + acme's rows, answers exactly as on globex's rows + as many missing ids
    from the same state (ids swapped), globex's rows end the same both ways, and no row of acme changes or is added.
    """
    before = _rows_of("acme")
    compared, acted = 0, set()
    for who in (globex_operator, globex_auditor, globex_developer):
        # the approval desk first: cancelling the calls would settle the requests waiting on them
        for model, theirs in sorted(acme_everywhere.items(), key=lambda item: item[0] is not ApprovalRequest):
            changelist = _url(model, "changelist")
            listed = console(who).get(changelist)
            if listed.status_code != 200:
                continue
            missing = [_missing(model) for _ in theirs]  # distinct: an integer key's is one number, counted on
            missing = [str(int(pk) + i) if pk.isdigit() else pk for i, pk in enumerate(missing)]
            swaps = list(zip(missing, theirs, strict=True))
            actions = list(admin.site._registry[model].get_actions(listed.wsgi_request))
            for index, action in enumerate(actions):
                own = globex_everywhere[model][index :: len(actions)] or globex_everywhere[model]  # rows left to act on
                where = (who.username, model._meta.label, action)
                with transaction.atomic():  # from the same state as the mixed selection below, then undone
                    absent = [_swapped(drawn, swaps) for drawn in _act(who, changelist, action, own + missing)]
                    own_absent = _rows(model, own)
                    transaction.set_rollback(True)
                original = _rows(model, own)
                assert _act(who, changelist, action, own + theirs) == absent, where
                assert _rows(model, own) == own_absent, where
                compared += 1
                if own_absent != original:
                    acted.add(where)
    desk = ("globex-operator", "approvals.ApprovalRequest")
    assert compared and {(*desk, "approve_selected"), (*desk, "reject_selected")} <= acted  # own rows acted on
    assert _rows_of("acme") == before
