"""Review of 2026-12-05 (s): the four-eyes rule end to end after the day's three rounds of changes (df5120f..8bfd40c).

Each test fails on the reviewed code (main at 8bfd40c) and states what was found and what is expected.

Findings: once an approver's standing came back (both approvals of a two-approver call stand again), the desk
said "0 more approval(s) needed ... May still approve: nobody who can decide it is available" and told each approver
"another operator must approve it", though either one's confirmation releases the call; the escalation e-mail went to
an operator who had approved this round (whose approval would be refused) and told the fallback group "2 needed"
when one was; the audit trail of a released call did not say whose approvals released it nor how many it needed,
so an approval that no longer counted (its giver lost the role) read like one that did.

Checked and found holding (no test here): no door releases a call on fewer distinct standing approvers — the API,
the desk's page and "Approve selected" (each bound to the listed ``arguments_hash``; a missing one is taken as the
model's original and refused once edited) all go through ``approvals.services._decide_in_transaction`` under the
request's row lock; the decider's own standing is ``approval_may_decide`` (requester, tenant, permission, groups,
further restrictions; inactive or deleted users fail ``has_perm`` / count as ``None``); a confirmation needs
``required - 1`` other standing approvals of the same round and adds no row (an editor's confirmation is refused, a
new round counts only the editor); the only move out of ``pending_approval`` into ``queued`` / ``awaiting_result``
is ``waiting.tool_call_release``. Edits: ``edited_version`` never lowers ``required_approvals`` and judges the new
version as the call's user. Re-holds (``tool_call_require_reapproval``): a new round, ``max`` of the old and new
requirement, escalation reset, earlier rounds' approvals never count. Escalation: the fallback group stands in for
the request's own restriction only; approvals of the round keep counting while their givers stand. ``_code_verdict``
floors at the risk's minimum and the operators' rule; a failing rule source holds for the minimum. Compensations are
requested as the step's user (its requester excluded); the adapters (pydantic-ai, LangGraph, OpenAI Agents) and MCP
read decisions from toolhub and never decide; agent creators are not requesters (no rule says otherwise). The API's
``approvals_in_round`` and the desk's "Approvals in this round" count what a decision counts; webhook payloads carry
no counts (nothing to contradict). ``verify_audit`` checks the chains only; exports hold calls, not decisions.
"""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from approvals.unanswered import approvals_escalate_due
from tests.approvals.conftest import Hold, hold, third_operator  # noqa: F401 - fixtures
from tests.helpers import console
from toolhub.models import AuditEvent, ToolGroup

pytestmark = pytest.mark.django_db


def _fresh(user: User) -> User:
    """The user as a new login reads them (permissions and groups read again)."""
    return User.objects.get(pk=user.pk)


def _regained(held: Hold, first: User, second: User) -> ApprovalRequest:
    """A two-approver request that both approved, the first while standing, then not, then standing again."""
    operators = Group.objects.get(name="operators")
    request = held(approvers=2)
    approval_approve(request_id=request.pk, user=first, expected_round=1)
    first.groups.remove(operators)
    approval_approve(request_id=request.pk, user=_fresh(second), expected_round=1)
    first.groups.add(operators)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    return request


def test_the_desk_tells_approvers_whose_standing_came_back_that_nobody_may_release_the_call(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Two operators approved alice's critical call; the first lost the operators role in between and got it back,
    so both approvals stand again and the call waits (standing is counted when someone decides, 897e422).

    Found: the desk's "Still to approve" (``approvals.selectors.approval_progress``) computes who may approve only
    while approvals are missing, and the change page (``admin_decisions.render_change_form``) warns whoever
    approved this round: it reads "0 more approval(s) needed ... May still approve: nobody who can decide it is
    available" and "You approved this version already ...; another operator must approve it" — while either
    approver's confirmation releases the call (``services._approval``). Nobody is pointed at it; it expires.
    Expect: the desk names the approvers whose confirmation releases the call, and does not tell them that
    another operator must approve it.
    """
    request = _regained(hold, operator, second_operator)

    page = console(_fresh(operator)).get(reverse("admin:approvals_approvalrequest_change", args=[request.pk]))

    text = page.content.decode()
    assert "Round 1: 2 of 2 approval(s)" in text
    assert "nobody who can decide it is available" not in text, "the desk says nobody may release the call"
    assert "May still approve: operator, operator2" in text or "May still approve: operator2, operator" in text
    assert "another operator must approve it" not in text
    # and what the desk points at works: the first approver's confirmation releases the call
    approval_approve(request_id=request.pk, user=_fresh(operator), expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED


def test_an_escalation_mails_an_approver_whose_approval_is_given_and_asks_the_fallback_for_every_approval(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    third_operator: User,  # noqa: F811 - the fixture
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """alice's critical call (two approvers) is governed by a tool group whose fallback group is on duty; one
    operator of the approver group approved, then the request escalated.

    Found: ``approvals.notifications.approval_email_approvers`` writes to every ``approvers_of`` the request,
    including the operator who already approved this round (whose approval of this version would be refused:
    "You already approved this version"), and says "Approvals:   2 needed" to the fallback group when one is
    missing — unlike the desk's "Still to approve" (``approval_progress``), which counts what a decision counts.
    Expect: the escalation e-mail goes to those who may still give an approval that counts (not the operator who
    gave theirs), and says how many are still needed: 1 of 2.
    """
    approvers, duty = Group.objects.create(name="effect-approvers-s"), Group.objects.create(name="duty-s")
    operator.groups.add(approvers)
    second_operator.groups.add(approvers)
    third_operator.groups.add(duty)
    ToolGroup.objects.create(
        name="effects-s", extra_tools=["risky_effect"], approver_group=approvers, escalation_group=duty
    )
    request = hold(approvers=2)
    approval_approve(request_id=request.pk, user=_fresh(operator), expected_round=1)
    mailoutbox.clear()

    ApprovalRequest.objects.filter(pk=request.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert approvals_escalate_due() == 1

    recipients = sorted(address for message in mailoutbox for address in message.to)
    assert "operator@example.com" not in recipients, "the operator who approved is asked to approve again"
    assert recipients == ["operator2@example.com", "operator3@example.com"]
    assert all("1 of 2 still needed" in message.body for message in mailoutbox), mailoutbox[0].body


def test_the_audit_trail_of_a_released_call_does_not_say_whose_approvals_released_it(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    third_operator: User,  # noqa: F811 - the fixture
) -> None:
    """An auditor reads the trail of alice's critical call (two approvers): the first operator approved, then was
    moved out of the operators role (their approval no longer counts, ``ApproverStanding``); the second approved
    (the call stayed held: one approval standing), the third approved and released it.

    Found: the trail holds three ``approval.approve`` events alike (operator, operator2, operator3) and a
    ``call.queued`` with ``{"reason": "approved"}``; nothing says whose approvals the release counted nor how many
    it needed (``call.pending_approval`` records neither), so an auditor cannot tell from the trail alone that the
    call ran on two distinct approvals of people who could decide then, and would count the first operator's.
    Expect: the releasing decision's event names the approvers whose approvals of the released version counted
    (standing when it was released) and the number required.
    """
    operators = Group.objects.get(name="operators")
    request = hold(approvers=2)
    approval_approve(request_id=request.pk, user=operator, expected_round=1)
    operator.groups.remove(operators)
    approval_approve(request_id=request.pk, user=_fresh(second_operator), expected_round=1)
    approval_approve(request_id=request.pk, user=_fresh(third_operator), expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED

    events = list(AuditEvent.objects.filter(call_id=request.call_id, event_type="approval.approve").order_by("seq"))
    assert [event.actor for event in events] == ["operator:operator", "operator:operator2", "operator:operator3"]
    releasing = events[-1].payload
    assert releasing.get("required_approvals") == 2, releasing
    assert releasing.get("approved_by") == ["operator2", "operator3"], releasing
    # a partial approval says it released nothing, with who counted so far
    assert events[1].payload.get("approved_by") == ["operator2"], events[1].payload
