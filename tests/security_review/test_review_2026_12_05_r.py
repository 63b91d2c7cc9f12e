"""Review of 2026-12-05 (r): the newest commits (4fbcf26..f0f926d) for regressions, holes and cheap denial of service.

Each test fails on the reviewed code (main at f0f926d) and states what was found and what is expected.
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
