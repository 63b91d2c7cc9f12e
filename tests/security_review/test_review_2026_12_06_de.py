"""Review 2026-12-06 de: a review of review cv (the tenant-argument check at the desk) and of who may approve a request
that is already pending.

Each finding's test failed on the reviewed code (main at 9dc5af6) and passes now.

Findings:

1. A request copied its tool's governing groups' approver restrictions when it was opened: a tool added to a tool
   group with an approver group (or a group given one) afterwards left its pending requests decidable by every
   operator of the tenant, and the desk, ``approvers_of`` and the e-mails named them all. A decision is now judged
   on the restrictions of creation and of now together (``approvals.deciders.further_restrictions`` adds the current
   governing groups', read through the governance cache): never looser than at creation, as tight as now
   (``test_a_tool_added_to_a_restricted_group_binds_its_pending_requests``).
2. The approvals a request needs were copied from the rule that held it: an operator raising that rule's
   ``required_approvals`` (or a stricter rule matching since) left pending requests released on the old count. The
   request now needs the larger of its own count and what the operators' rules ask for it now
   (``approvals.deciders.required_approvals_now``), in the decision, the desk, the API and the e-mails
   (``test_raising_a_rules_required_approvals_reaches_pending_requests``).

Checked and holding:
- cv's tenant-argument check in ``prepared_version``: every edit (desk form, REST ``arguments``) goes through
  ``approvals.editing.edited_version`` -> ``prepared_version``; bulk approval carries no edit; a reopened request
  (tool changed) takes the call's arguments the pipeline prepared. The check runs after the ``before`` interceptors,
  so an interceptor's rewrite naming another tenant is refused too; the worker checks again before running.
- A refused call keeps ``raw_arguments`` (what the model sent, sensitive values withheld) and its ``call.requested``
  event never carried arguments for a refusal: the tenant denial moving into ``prepared_version`` hides nothing that
  was shown before from the admin or the auditor.
- Judging pending rows on the governance of now costs no query per row: the approvals API reads the governance stamp
  once per response (``test_the_approvals_list_reads_governance_once_whatever_its_rows``; it failed, 9 queries for
  three rows against 5 for one, before the list took one ``governance_scope``); ``approvers_of`` stays one query
  under its caller's scope (``tests/approvals/test_approvers.py`` now measures it inside one).
- Removing an approver from the request's approver group takes effect at once: memberships are read live (and after
  the decision's lock).
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalRule, ApprovalStatus
from approvals.selectors import approval_progress, approvers_of
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.security_review.conftest import client_for
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import CallStatus, ToolGroup

pytestmark = pytest.mark.django_db


def _group(name: str, *members: User) -> Group:
    group = Group.objects.create(name=name)
    group.user_set.add(*members)
    return group


def test_a_tool_added_to_a_restricted_group_binds_its_pending_requests(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Found: a request copied its tool's groups' approver restrictions when it was opened; a tool added afterwards
    to a group whose approvers are the treasury left the request to every operator of the tenant (the desk, the
    approvers' list and a decision alike).

    Expect: the restriction as it stands now holds for the pending request too: an operator outside the treasury is
    refused (nothing recorded), the desk and ``approvers_of`` name only the treasury, the API says so too.
    """
    request = hold()
    assert request.approver_group is None and approvers_of(request) == [operator, second_operator]

    treasury = _group("treasury", second_operator)
    ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)

    assert [user.username for user in approvers_of(request)] == ["operator2"]
    progress = approval_progress(request)
    assert progress.may_approve == ["operator2"] and progress.group == "treasury"
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
    assert not request.decisions.exists()
    answer = client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert answer.status_code == 403, answer.content

    approval_approve(request_id=request.pk, user=second_operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED


def test_raising_a_rules_required_approvals_reaches_pending_requests(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Found: the approvals a request needs were copied from the rule that held it; raising the rule to two approvers
    left the pending request released by one.

    Expect: the request needs what the rule asks now (never fewer than at creation): one approval leaves the call
    waiting, the desk and the API say one more is needed, a second approver releases it.
    """
    rule = ApprovalRule.objects.create(name="payments", tool_name="risky_effect", required_approvals=1)
    request = hold()
    assert request.rule == rule

    rule.required_approvals = 2
    rule.save()

    approval_approve(request_id=request.pk, user=operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and request.call.status == CallStatus.PENDING_APPROVAL
    progress = approval_progress(request)
    assert (progress.needed, progress.remaining, progress.may_approve) == (2, 1, ["operator2"])
    shown: dict[str, Any] = client_for(second_operator).get(f"/api/v1/approvals/{request.pk}/").json()
    assert shown["required_approvals"] == 2, shown

    approval_approve(request_id=request.pk, user=second_operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED


def test_the_approvals_list_reads_governance_once_whatever_its_rows(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
) -> None:
    """Found: with the fix of findings 1 and 2 alone, judging each pending row on the governance of now read the
    governance stamp once per row outside a scope: a longer page of the approvals API cost more queries.

    Expect: the page reads it once (one ``governance_scope`` for the response): three pending rows cost what one does.
    """
    ApprovalRule.objects.create(name="payments", tool_name="risky_effect", required_approvals=1)
    ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=_group("treasury"))
    hold("pay 1")
    client = client_for(operator)
    client.get("/api/v1/approvals/?status=pending")  # warms what any first request reads

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/v1/approvals/?status=pending").status_code == 200
        return len(queries.captured_queries)

    one = page_queries()
    hold("pay 2"), hold("pay 3")
    assert page_queries() == one
