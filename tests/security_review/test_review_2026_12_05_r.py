"""Review of 2026-12-05 (r): the newest commits (4fbcf26..f0f926d) for regressions, holes and cheap denial of service.

Each test fails on the reviewed code (main at f0f926d) and states what was found and what is expected.

Findings: since the middleware reads ``request.POST`` first, a malformed multipart body under ``/api/`` was
answered with Django's HTML 400 page instead of DRF's ``{"detail": "Multipart form parse error - ..."}``; the
approvals list read each approver's groups once per row and approver (a member's ``?page_size=500``: ~1,000
queries a page, unthrottled).

Checked and found holding (no test here): review n — no answer lost or renamed a field: ``CallOutcomeSerializer``
answers what ``_answer`` built by hand (``approval_id`` only while pending, ``replayed``, ``detail`` on 4xx),
``ToolCallDetailSerializer.approval_id`` is what the wait view added (the detail is read from
``tool_calls_visible_to``: a colleague's or another tenant's call is a 404 before its approval id is read, and
idempotency replays are keyed by tenant and user); ``allow_null`` on read-only fields, ``JSONObjectField`` /
``JSONObjectOrTextField`` and ``minLength`` change the document only. Review p — four eyes: a confirmation counts
the confirmer once (``by != user.pk``) and needs ``required - 1`` other approvals standing now, of the same round
(an edit opens a new one, in which the editor's confirmation is refused), the requester is refused before any
count, two confirmations serialise on the request's row lock (the second finds it decided); the audit trail keeps
each person's ``approval.approve`` (the confirmation flagged ``confirms_own_approval``) and the release's actor;
``_code_verdict`` never lowers the approvals (``max`` with the risk's minimum; rules already floor a tenant's rule
at the platform's) and takes no approver group from a rule (groups come from the tool's groups); a failing rule
source still holds. The quota: the tools refuse a path of more than ``MAX_DEPTH`` directories, the walk stops at
that depth (so recursion is bounded) and closes its descriptors; a walk of 10,000 entries costs ~25 ms per write
(measured, not a finding); a workspace wedged by the shell (``chmod``, a link to an unreadable directory, which
``os.fwalk`` opens to compare) needs an administrator's listed commands, as documented. The middleware: JSON and
PUT/PATCH bodies are never read by it; DRF's ``request.data`` for a form after it reads Django's parsed
``POST``/``FILES``; no view reads ``request.body``; the MCP endpoint is a separate ASGI app, outside Django's
middleware; no admin form uploads files; a form body is parsed before authentication, as Django's CSRF check
already did for every console POST (and ASGI reads the whole body first). Migration 0031 — only reads and inserts
(the 0029 trigger fires on UPDATE of a slug only); slugs compare exactly, as PostgreSQL's unique index and the
scoping do (a slug differing only in case is another tenant); a slug longer than ``Tenant.slug`` could never be a
tenant's; its ``SELECT DISTINCT tenant`` scans each table (audit events have no index on ``tenant``) once, at
upgrade, reading only (noted, no test). Cheap denial of service — the admin desk's list computes no standing; the
change page two (constant); scrubbing with 256 lingering scopes was measured by review p.
"""

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.deciders import approvals_in_round
from approvals.models import ApprovalRequest, ApprovalRule
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolGroup

pytestmark = pytest.mark.django_db


# --- cf17f77: StorableAddressMiddleware reads request.POST before any view ---------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data; boundary=\x01bad",  # a boundary Django refuses
        "multipart/form-data",  # no boundary at all
    ],
)
def test_a_body_that_is_no_form_is_refused_in_the_apis_error_shape(carol: User, content_type: str) -> None:
    """A member (any API client) posts a malformed multipart body to ``POST /api/v1/calls/``.

    Found: ``toolhub/middleware.py`` ``address_problem`` now reads ``request.POST`` for every request, before DRF;
    Django's ``MultiPartParserError`` escapes the middleware and Django answers its HTML "Bad Request (400)" page.
    Until cf17f77 DRF's parser answered ``{"detail": "Multipart form parse error - ..."}`` (JSON), the error shape
    the OpenAPI document promises for every 400 under ``/api/`` (``toolhub.api.schema``, review n).
    Expect: 400 with ``{"detail": "Multipart form parse error - ..."}`` as before.
    """
    answer = client_for(carol).generic("POST", "/api/v1/calls/", b"not a form", content_type=content_type)

    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["detail"].startswith("Multipart form parse error - ")


# --- a75b0c8/c22ef67: whose approvals count (ApproverStanding), per row of a list ---------------------------------


def _approvals_list_queries(reader: User) -> int:
    with CaptureQueriesContext(connection) as queries:
        page = client_for(reader).get("/api/v1/approvals/?page_size=500")
    assert page.status_code == 200
    return len(queries.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_listing_approvals_costs_no_query_per_row_and_approver(
    alice: User, tenant: Tenant, roles: dict[str, Group], acme_operator: User
) -> None:
    """alice (a plain member of acme) lists her own approval requests, ``GET /api/v1/approvals/?page_size=500``,
    as often as she likes (reads are not throttled). Her calls of a tool in a group whose approvers are restricted
    (``ToolGroup.approver_group``, the usual set-up) were each approved by two operators.

    Found: ``approvals_in_round`` counts each row's approvals through ``ApproverStanding``, which reads each
    decider once per list, but ``approval_may_decide`` then reads the decider's groups
    (``user.groups.values_list``) once per row and decider: a page of 500 requests with two approvals each costs
    ~1,000 queries per request, on every page a member asks for (decided requests count too).
    Expect: the list costs as many queries for many rows as for few (``tests/posture/test_api_query_counts.py``).
    """
    ToolGroup.objects.create(name="review-r-payments", extra_tools=["risky_effect"], approver_group=roles["operators"])
    ApprovalRule.objects.create(name="review-r-three", tool_name="risky_effect", required_approvals=3, priority=50)
    second = make_user("op-second-r", tenant=tenant, staff=True, groups=(roles["operators"],))

    def held_and_approved(count: int) -> None:
        for _ in range(count):
            held = client_for(alice).post(
                "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "r"}}, format="json"
            )
            assert held.status_code == 202, held.content
            request = ApprovalRequest.objects.get(pk=held.json()["approval_id"])
            assert request.approver_group == roles["operators"]
            for operator in (acme_operator, second):
                client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
            assert approvals_in_round(request) == 2

    held_and_approved(2)
    _approvals_list_queries(alice)  # warm: governance caches
    few = _approvals_list_queries(alice)
    held_and_approved(6)
    more = _approvals_list_queries(alice)

    assert more == few, f"{few} queries for 2 requests, {more} for 8"
