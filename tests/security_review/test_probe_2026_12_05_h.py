"""Probe of 2026-12-05 (h): how people and programs prove who they are, and what the HTTP layer tells them.

Each test fails on the code as probed; its docstring says who the attacker or user is, what they reached, where
("Found: ...") and what is expected ("Expect: ...").

Checked and found holding (no test here; most already have one in earlier probes):

- REST tokens: DRF's ``Token`` in ``Authorization: Token <key>`` only (not ``Bearer``, the query string, a cookie or
  basic auth); a deleted token and a deactivated user's token answer 401/403 on every API URL; a password change
  ends sessions; tokens and their admin page are for superusers only (``CrossTenantOnly``; no role holds
  ``authtoken.*``), so no tenant staff reads a key. Keys are stored as DRF stores them (in clear, as Django's
  session keys are): not promised otherwise.
- MCP: ``Bearer``/``Token`` (any case) from the ``Authorization`` header only, loaded per HTTP request with the
  active flag; anonymous ``GET``/``POST``/``DELETE``/``OPTIONS``/``HEAD`` on ``/mcp`` answer 401 with the same
  body and no CORS header; a foreign ``Origin`` answers 403 and a foreign ``Host`` 421 (the SDK's DNS-rebinding
  guard from ``ALLOWED_HOSTS``); the tenant header answers a foreign and a missing tenant alike.
- Anonymous visitors: every ``/api/v1/`` URL and method (GET, HEAD, OPTIONS, PUT, PATCH, DELETE) answers 403 before
  the body is read; ``/api/schema/`` and ``/api/docs/`` answer (deliberate) and name no tenant, user, agent or tool.
- HTTP methods and metadata: every detail view allows only its verbs (405 otherwise; agents' PUT/PATCH 403 before
  the row is read); ``OPTIONS`` of another tenant's call, run, approval, saga and artifact answers exactly as for
  a missing id; the browsable API (``?format=api``) renders no select of tenants, users, runs or agents (the
  filters are text or static choices), and its forms carry the CSRF token; ``?format=`` on the catalogue takes
  only its renderers (400 otherwise).
- 404 against 403 across tenants, for every detail and action URL (calls, results, cancel, artifacts of another
  call, runs and their retry/cancel/rollback, approvals and their approve/reject, sagas and their rollback,
  agents and their PATCH): another tenant's id answers as a missing one; a colleague's visible row 403.
- CSRF: the approval desk's decide views and bulk actions, "Verify now", the call exports and the REST API with a
  session all refuse a request without the token; ``X-Frame-Options: DENY`` on the desk, the admin and the API
  docs; ``nosniff`` and an attachment for artifact downloads.
- Redirects: the admin login's ``next=`` and "Verify now"'s ``next`` only go to this site; the root redirect is
  fixed.
- Throttles: ``calls`` (REST and MCP counted once), ``runs`` and ``decisions`` per user, reads never. (The console
  login had no lockout when probed; it has one since: README "Logins", tests/posture/test_login_lockout.py.)
- A deactivated or removed person: sessions, tokens (REST, MCP), the desk's pages and artifact downloads refuse
  them on the next request; ``approvers_of`` mails only active approvers in the tenant.

Findings:

1. An approval given by an operator who was then deactivated, removed from the tenant or stripped of the decide
   permission still counted toward the request's quorum: a second operator's approval released a call that needs
   two approvers with one approval from someone who may still decide (``approvals.services._decide_in_transaction``
   counted every approval of the round).
2. On PostgreSQL a NUL character (``%00``) in a saga id of the sagas API or in its ``?tenant=``, or in a list
   filter of the console (``?tool_name=``, ``?tenant=``, ``?event_type=``), answered 500 (``DataError``): text no
   column can hold went into a query.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, make_user
from tests.testapp.models import SideEffect
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.django_db(transaction=True)


# --- 1. an approval of someone who may no longer decide -------------------------------------------------------


def _leave_by_deactivation(user: User, roles: dict[str, Group]) -> None:
    user.is_active = False
    user.save()


def _leave_by_removal(user: User, roles: dict[str, Group]) -> None:
    TenantMembership.objects.filter(user=user).delete()


def _leave_by_losing_the_role(user: User, roles: dict[str, Group]) -> None:
    user.groups.remove(roles["operators"])


def _approve(user: User, request: ApprovalRequest) -> Any:
    request.refresh_from_db()
    return client_for(user).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": request.round}, format="json")


@pytest.mark.parametrize(
    "leave", [_leave_by_deactivation, _leave_by_removal, _leave_by_losing_the_role], ids=lambda f: f.__name__[10:]
)
def test_an_approval_of_an_operator_who_may_no_longer_decide_no_longer_counts(
    leave: Any, alice: User, tenant: Tenant, roles: dict[str, Group], acme_operator: User
) -> None:
    """alice's ``risky_effect`` call needs two approvers (a platform rule). acme's operator approves it, then is
    deactivated (a compromised account), removed from acme or loses the operators role; a second operator
    approves.

    Found: ``approvals.services._decide_in_transaction`` counted every approval of the round, whoever gave it,
    so the second approval released the call: it ran on one approval from someone who may still decide.
    Expect: only approvals of people who may still decide the request count (as a requester who left runs
    nothing): the call stays held, the API's ``approvals_in_round`` says 1, and a third operator's approval
    releases it.
    """
    second = make_user("op-second-h", tenant=tenant, staff=True, groups=(roles["operators"],))
    third = make_user("op-third-h", tenant=tenant, staff=True, groups=(roles["operators"],))
    ApprovalRule.objects.create(name="platform-two-h", tool_name="risky_effect", required_approvals=2, priority=50)
    held = client_for(alice).post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "h"}}, format="json")
    request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])
    assert request.required_approvals == 2
    assert _approve(acme_operator, request).status_code == 200

    leave(acme_operator, roles)
    answer = _approve(second, request)

    assert answer.status_code == 200
    request.refresh_from_db()
    assert (request.status, answer.json()["approvals_in_round"]) == (ApprovalStatus.PENDING, 1)
    assert not SideEffect.objects.exists()
    assert _approve(third, request).status_code == 200
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["h"]


# --- 2. NUL characters in the query string and the path ------------------------------------------------------


@pytest.mark.postgres
def test_a_nul_in_a_saga_id_its_tenant_or_a_console_filter_is_refused_not_a_server_error(
    acme: AcmeData, alice: User, acme_operator: User
) -> None:
    """alice (a member) asks the sagas API for ``%00`` as a saga id and as ``?tenant=``; acme's operator filters the
    console's lists by ``%00``.

    Found: on PostgreSQL each answered 500 (``DataError``: the text went into a query; ``toolhub.sagas.api``
    ``visible_saga`` and the console's list filters).
    Expect: 400 and nothing else: a path or query string holding text no column can hold is refused before any
    view puts it into a query (``toolhub.middleware.StorableAddressMiddleware``).
    """
    api = client_for(alice)
    api.raise_request_exception = False  # a server error is answered as a browser gets it: a 500
    key = acme.saga.key
    answers = {
        "saga id": api.get("/api/v1/sagas/%00/").status_code,
        "saga tenant": api.get(f"/api/v1/sagas/{key}/?tenant=%00").status_code,
        "rollback id": api.post("/api/v1/sagas/%00/rollback/").status_code,
        "rollback tenant": api.post(f"/api/v1/sagas/{key}/rollback/?tenant=%00").status_code,
    }
    console = Client(raise_request_exception=False)
    console.force_login(acme_operator)
    for url in (
        "/admin/toolhub/toolcall/?tool_name=%00",
        "/admin/toolhub/toolcall/?tenant=%00",
        "/admin/toolhub/auditevent/?event_type=%00",
        "/admin/agents_app/agentrun/?tenant=%00",
    ):
        answers[url] = console.get(url).status_code

    assert answers == dict.fromkeys(answers, 400)
