"""Review 2026-12-06 eu: four-eyes leftovers, approval rules changed while a request is pending.

Each finding's test failed on the reviewed code (main at 98885c5) and passes now.

Findings:

1. A pending request was judged at the risk it was held at: an operator raising the tool's risk override to
   ``critical`` (two distinct approvers) while a call waited left it released, and run, by one approval; an operators'
   rule matching ``critical`` calls did not reach it either. ``approvals.governing.required_approvals_now`` now holds
   a pending request to the stricter of the rule at request and at decision: the higher of its risk and the tool's
   risk now (``risk_now``, from the governance-cached catalogue), its minimum (two for ``critical``) and the rules
   matched at that risk; never fewer than it needed (a risk lowered asks nothing less)
   (``test_a_tool_raised_to_critical_while_pending_needs_two_approvers``,
   ``test_a_rule_for_critical_calls_reaches_a_call_raised_to_critical``).
2. The worker re-checked an approved call's tool version, permissions and approval binding, but not the rule the
   approval was given under: a call released by one approval and still queued (busy or stopped workers) when the
   tool was raised to ``critical`` or its rule to two approvers ran on that one approval, though the design says
   "if the tool definition or the rule changed between approval and execution, the approval no longer applies". The
   release now records on the request the approvals it was released on (``required_approvals``, written in the
   decision's statement); before running an approved call the worker asks (``toolhub.signals.approval_shortfall``,
   answered by ``approvals.governing.approval_shortfall``) whether governance asks more now, and if so runs nothing
   and sends the call back for a new round (``tool_call_require_reapproval`` with a reason; request source
   ``rules_changed``, migration ``approvals 0019``)
   (``test_a_tool_raised_to_critical_after_one_approval_is_sent_back_before_it_runs``,
   ``test_a_rule_raised_after_the_approval_is_sent_back_before_it_runs``).
3. A superuser outside a tool group's approver group may decide its calls; the README's four-eyes section says so on
   purpose (they could grant the group to themselves), and that was left. But the decision's event read like any
   approver's, so the trail did not tell a call released past the named approvers from one they released. Such a
   decision's ``approval.approve`` / ``approval.edit`` / ``approval.reject`` event now says
   ``superuser_outside_approvers`` (``approvals.deciders.decides_as_superuser_only``)
   (``test_a_superuser_outside_the_approver_group_is_audited_distinctly``).

Checked and holding:
- A tool disabled, or a deny grant added for the requester, while a call waited: approved, the call is refused when
  the worker claims it (``refusal_at_execution``: authorization, the catalogue's ``enabled``, the tenant arguments,
  the binding, under the governance of then) and runs nothing; an external tool's call is checked so at its release.
- A risk or rule lowered while pending asks nothing less; a call approved by as many as governance asks at its
  claim runs with no new decision.
- The tool's own ``needs_approval`` predicate is not re-run at decision: it decides whether a call is held, not by
  how many (that is the risk's and the rules', both re-read now), and a changed tool is a new version, which the
  worker already sends back for a new decision. Approver restrictions of now (``further_restrictions``), approver
  standing (``ApproverStanding``) and a rule's raised ``required_approvals`` already reached pending requests
  (reviews de, dp).

Existing tests changed: ``tests/approvals/test_edit_admin.py`` and ``test_review_2026_12_05_af.py`` held a plain
request and then raised the tool to critical for a second one, relying on the first staying at one approver; their
second request now needs two approvers by a rule matching its note (``hold(..., only_this=True)``).
``tests/approvepath/test_approve_statements.py``'s stand-in for ``decided_row`` passes its new keyword values on.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from approvals.selectors import approval_progress
from approvals.services import approval_approve, approval_reject
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.testapp.models import SideEffect
from toolhub.catalogue import tool_definition_govern
from toolhub.models import AuditEvent, CallStatus, Grant, GrantEffect, ToolCall, ToolDefinition, ToolGroup

pytestmark = pytest.mark.django_db

Settle = Callable[..., Any]


def _govern(**change: Any) -> None:
    definition = ToolDefinition.objects.get(name="risky_effect")
    tool_definition_govern(definition=definition, actor="operator:admin", **change)


def _call(request: ApprovalRequest) -> ToolCall:
    return ToolCall.objects.get(pk=request.call_id)


def test_a_tool_raised_to_critical_while_pending_needs_two_approvers(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
) -> None:
    """Found: a request kept the risk it was held at; an operator raising the tool to ``critical`` (two approvers)
    while a call waited left that call released, and run, by one approval.

    Expect: the stricter of the rule at request and the rule at decision: one approval leaves the call waiting (the
    desk says one more is needed), a second, different operator releases it and it runs once.
    """
    request = hold()
    assert (request.risk, request.required_approvals) == ("high", 1)

    _govern(risk_override="critical")

    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and _call(request).status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0
    progress = approval_progress(request)
    assert (progress.needed, progress.remaining) == (2, 1)

    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED and _call(request).status == CallStatus.SUCCEEDED
    assert SideEffect.objects.count() == 1


def test_a_rule_for_critical_calls_reaches_a_call_raised_to_critical(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
) -> None:
    """Found: the operators' rules were matched, at decision, against the risk the request was held at: a rule asking
    three approvers of every critical call did not reach a pending call whose tool was raised to critical.

    Expect: the rules are matched at the risk that governs the tool now (never lower than at request): two approvals
    leave the call waiting, the desk says three are needed.
    """
    request = hold()
    ApprovalRule.objects.create(name="critical", min_risk="critical", required_approvals=3)
    _govern(risk_override="critical")

    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and _call(request).status == CallStatus.PENDING_APPROVAL
    assert approval_progress(request).needed == 3
    assert SideEffect.objects.count() == 0


def test_a_tool_lowered_while_pending_keeps_the_approvals_it_needed(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
) -> None:
    """Holding: lowering the tool's risk (critical -> high) while a call waits asks nothing less of it: it still needs
    the two approvals it was held for.
    """
    request = hold(approvers=2)
    _govern(risk_override="high")

    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and SideEffect.objects.count() == 0
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=1)
    assert _call(request).status == CallStatus.SUCCEEDED and SideEffect.objects.count() == 1


def test_a_tool_disabled_while_pending_does_not_run_on_approval(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    committed: Settle,
) -> None:
    """Holding: a call whose tool an operator disabled while it waited is refused when it goes out (the worker checks
    permissions and the catalogue as they are then): approved, it runs nothing and is ``denied``.
    """
    request = hold()
    _govern(enabled=False)

    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    call = _call(request)
    assert call.status == CallStatus.DENIED and SideEffect.objects.count() == 0


def test_a_grant_revoked_while_pending_does_not_run_on_approval(
    hold: Hold,  # noqa: F811 - the fixture
    alice: User,
    operator: User,
    committed: Settle,
) -> None:
    """Holding: a deny grant for the requester added while the call waited is applied when it executes: approved, it
    runs nothing and is ``denied``.
    """
    request = hold()
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="risky_effect", user=alice)

    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    assert _call(request).status == CallStatus.DENIED and SideEffect.objects.count() == 0


def test_a_tool_raised_to_critical_after_one_approval_is_sent_back_before_it_runs(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the worker re-checked the tool's version, permissions and the approval's binding, but not the rule the
    approval was given under: a call approved by one operator and still queued (workers busy, or down) when an
    operator raised its tool to ``critical`` ran on that one approval.

    Expect: the approval no longer applies when the rule asks for more than it had (as when the tool's definition
    changed): the worker runs nothing and sends the call back for a new decision, which needs two distinct approvers.
    """
    request = hold()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
    assert _call(request).status == CallStatus.QUEUED

    _govern(risk_override="critical")
    for callback in callbacks:
        callback()

    request.refresh_from_db()
    assert _call(request).status == CallStatus.PENDING_APPROVAL and SideEffect.objects.count() == 0
    assert (request.status, request.round, request.required_approvals) == (ApprovalStatus.PENDING, 2, 2)
    assert request.source == "rules_changed"
    sent_back = AuditEvent.objects.filter(call_id=request.call_id, event_type="call.pending_approval").last()
    assert sent_back is not None and "needs 2 approvals" in sent_back.payload["reason"]
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=2)
    assert _call(request).status == CallStatus.PENDING_APPROVAL and SideEffect.objects.count() == 0
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    assert _call(request).status == CallStatus.SUCCEEDED and SideEffect.objects.count() == 1


def test_a_rule_raised_after_the_approval_is_sent_back_before_it_runs(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: as above, for an operators' rule raised to two approvers between the approval and the worker's claim.

    Expect: the worker runs nothing and the call waits for a new decision that needs two approvers.
    """
    rule = ApprovalRule.objects.create(name="payments", tool_name="risky_effect", required_approvals=1)
    request = hold()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
    rule.required_approvals = 2
    rule.save()
    for callback in callbacks:
        callback()

    request.refresh_from_db()
    assert _call(request).status == CallStatus.PENDING_APPROVAL and SideEffect.objects.count() == 0
    assert (request.status, request.required_approvals) == (ApprovalStatus.PENDING, 2)


def test_an_approval_that_still_suffices_runs_when_the_rule_is_unchanged(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: a call approved by as many as governance asks when its worker claims it runs at once (a critical
    call's two approvals, a risk lowered meanwhile), with no new decision.
    """
    request = hold(approvers=2)
    approval_approve(request_id=request.pk, user=operator, expected_round=1)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=second_operator, expected_round=1)
    _govern(risk_override="high")
    for callback in callbacks:
        callback()
    assert _call(request).status == CallStatus.SUCCEEDED and SideEffect.objects.count() == 1


def test_a_superuser_outside_the_approver_group_is_audited_distinctly(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
) -> None:
    """Found: a superuser outside the tool group's approver group may decide (the README's four-eyes section says so:
    they could grant the group to themselves), but their decision's event read like any approver's: the trail did not
    tell a call released past the approvers the tool's groups name from one released by them.

    Expect: the decision is allowed and its ``approval.approve`` / ``approval.reject`` event says
    ``superuser_outside_approvers``; an approver of the group's event does not.
    """
    treasury = Group.objects.create(name="treasury")
    treasury.user_set.add(second_operator)
    ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)
    root = User.objects.create_superuser("root", "root@example.com", "root-password")
    approved, rejected, plain = hold("pay 1"), hold("pay 2"), hold("pay 3")

    committed(approval_approve, request_id=approved.pk, user=root, expected_round=1)
    committed(approval_reject, request_id=rejected.pk, user=root, comment="no")
    committed(approval_approve, request_id=plain.pk, user=second_operator, expected_round=1)

    def decided(request: ApprovalRequest, kind: str) -> dict[str, Any]:
        payload: dict[str, Any] = AuditEvent.objects.get(call_id=request.call_id, event_type=kind).payload
        return payload

    assert decided(approved, "approval.approve").get("superuser_outside_approvers") is True
    assert decided(rejected, "approval.reject").get("superuser_outside_approvers") is True
    assert "superuser_outside_approvers" not in decided(plain, "approval.approve")
    assert _call(approved).status == CallStatus.SUCCEEDED and _call(rejected).status == CallStatus.REJECTED
