"""Review 2026-12-06 fd: approvals sent back for a raised count (review eu, abf070d / f7f7cd1) — the claim's attempt
and the audit mark on the release (left by review ez, unexamined).

Each finding's test failed on the reviewed code (main at 346f72f) and passes now.

Findings:

1. A worker that sends an approved call back to the desk (``toolhub.waiting.tool_call_require_reapproval``: governance
   asks more approvals now, ``rules_changed``, or the older ``tool_changed``) kept its claim in the call's
   ``attempts``, though the tool never ran. A compensation's call is one row over all its attempts and its budget is
   ``SAGA_MAX_ATTEMPTS`` of that column (``sagas.compensating.apply_call_outcome``): a compensation sent back once
   and then failing on its first real run was failed as out of attempts with retries left (one fewer retry per
   send-back; with ``SAGA_MAX_ATTEMPTS=2``, none), its only attempt row numbered 2; an ordinary call ran as attempt 2
   having been tried once. The send-back now gives its claim back as a batch's hand-back of an unstarted call does
   (``attempts - 1``, ``worker`` cleared), guarded by the claim's attempt (only this claim's move), its event saying
   which ``attempt`` it gave back (``test_a_compensation_sent_back_for_more_approvals_keeps_its_retries``,
   ``test_a_call_sent_back_for_more_approvals_runs_as_its_first_attempt``); README.
2. ``superuser_outside_approvers`` was only on the superuser's own decision event. When another approver's approval
   later released the call, the releasing event — the one the README says an auditor reads "who released it" from
   alone (``approved_by``) — named the superuser among the approvers with no mark, reading as a release by the tool
   groups' approvers. An auditor filtering releases (the event whose call moved to ``queued``) or reading it alone
   was misled. Every ``approval.approve`` / ``approval.edit`` event whose ``approved_by`` counts a superuser outside
   the approvers now names them in ``superusers_outside_approvers``
   (``approvals.deciders.ApproverStanding.superusers_only``, ``approvals.services._approvers_counted``)
   (``test_a_release_counting_a_superuser_outside_the_approvers_says_so``); README.

Checked and holding:
- The lost-attempt budget (``CALL_MAX_ATTEMPTS``, ``sweeper._lost_in_a_row``) counts only the reconciler's requeues
  since the last decision: a send-back (``call.pending_approval`` by a worker) is no requeue, and the release that
  follows (a decision's ``call.queued``) ends the row; a call sent back N times is never needs_attention for it.
- The run's budgets (tool calls, steps) count calls, not claims: a call sent back is the same call, counted once.
- Giving the claim back reuses the attempt number, as the hand-back already did: the reconciler's move is guarded by
  ``lease_expired_by`` (a live re-claim's lease lies ahead) and outcome writes by the claim's attempt, so a stale
  reader of the given-back claim moves nothing; a claim hint carries the attempts as dispatched after the release.
- An external compensation's attempts are counted by its asks (``attempts_of``), not by claims: no send-back there
  (review ez's path asks anew as a new call).
"""

from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.approvals.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    Hold,
    hold,
    third_operator,
)
from tests.security_review.conftest import rolled_back_step
from tests.tenancy.conftest import make_user
from toolhub import Param, registry, tool
from toolhub.catalogue import tool_catalogue_sync, tool_definition_govern
from toolhub.models import AuditEvent, CallKind, CallStatus, Tenant, ToolCall, ToolDefinition, ToolGroup
from toolhub.sagas.models import Compensation, CompensationAttempt, CompensationStatus

pytestmark = pytest.mark.django_db

Settle = Callable[..., Any]


@tool(risk="high", idempotent=True)
def review_fd_release(line: str) -> dict:
    """Release a reserved line (a worker runs it); the carrier refuses it while the test runs."""
    raise RuntimeError("carrier refused the release")


@tool(
    risk="low",
    compensate_with="review_fd_release",
    compensation_mapping=lambda arguments, result: {"line": arguments["line"]},
)
def review_fd_reserve(line: Annotated[str, Param("The line to reserve.")]) -> dict:
    """Reserve a line."""
    return {"line": line}


@pytest.fixture
def line_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 2, "SAGA_RETRY_BASE_SECONDS": 10.0}
    with registry.temporarily(review_fd_release, review_fd_reserve):
        yield


@pytest.fixture
def acme_operator2(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-fd2", tenant=tenant, staff=True, groups=(roles["operators"],))


@pytest.fixture
def acme_operator3(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-fd3", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_a_compensation_sent_back_for_more_approvals_keeps_its_retries(
    line_tools: None,
    acme_operator: User,
    acme_operator2: User,
    acme_operator3: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the claim of a worker that sends an approved call back to the desk (review eu's ``rules_changed``, or
    the older ``tool_changed``) stayed counted in the call's ``attempts``, though the tool never ran; a
    compensation's call is one row over all its attempts (``SAGA_MAX_ATTEMPTS``), so a compensation sent back once
    and then failing on its first real run was failed as out of attempts, never retried.

    Expect: the send-back gives its claim back (``attempts`` as before the claim); the first run is attempt 1, its
    failure schedules the retry the budget allows, and the compensation's attempt row says attempt 1.
    """
    committed = django_capture_on_commit_callbacks
    rolled_back_step(acme_operator, "line-fd1", "review_fd_reserve", {"line": "L-3"}, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_fd_release")
    request = ApprovalRequest.objects.get(call=call)
    assert call.status == CallStatus.PENDING_APPROVAL and call.attempts == 0
    with committed(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=acme_operator2, expected_round=1)
    tool_catalogue_sync()
    definition = ToolDefinition.objects.get(name="review_fd_release")
    tool_definition_govern(definition=definition, actor="operator:admin", risk_override="critical")
    with committed(execute=True):
        for callback in callbacks:
            callback()
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL

    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator2, expected_round=2)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator3, expected_round=2)
    call.refresh_from_db()
    assert call.status == CallStatus.FAILED
    compensation = Compensation.objects.get(call=call)
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED, (compensation.status, compensation.attempts)
    assert compensation.attempts == call.attempts == 1
    assert list(CompensationAttempt.objects.filter(call=call).values_list("number", flat=True)) == [1]


def test_a_call_sent_back_for_more_approvals_runs_as_its_first_attempt(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    third_operator: User,  # noqa: F811 - the fixture
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an ordinary call sent back by the worker that claimed it (its tool raised to ``critical`` after one
    approval) kept that claim in ``attempts``: after the second round released it, it ran as attempt 2, its trail
    and the admin saying it had been tried twice.

    Expect: the send-back's event says which claim it gave back; the call is back at 0 attempts and runs as attempt 1.
    """
    request = hold()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
    definition = ToolDefinition.objects.get(name="risky_effect")
    tool_definition_govern(definition=definition, actor="operator:admin", risk_override="critical")
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.QUEUED
    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert call.attempts == 0, "the claim that sent the call back, running nothing, still counts as an attempt"
    sent_back = AuditEvent.objects.get(call_id=call.id, event_type="call.pending_approval", actor__startswith="worker:")
    assert sent_back.payload.get("attempt") == 1

    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    committed(approval_approve, request_id=request.pk, user=third_operator, expected_round=2)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1


def test_a_release_counting_a_superuser_outside_the_approvers_says_so(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
) -> None:
    """Found: review eu marks a superuser's decision outside a tool group's approvers (``superuser_outside_approvers``)
    on their own event only; when another approver's approval later released the call, the releasing event (the one
    an auditor reads "who released it" from: ``approved_by``) named the superuser among the approvers with no mark,
    reading as a release by the group's approvers alone.

    Expect: every approval event whose ``approved_by`` counts a superuser outside the approvers names them in
    ``superusers_outside_approvers``; a release by the group's approvers alone carries no such field.
    """
    treasury = Group.objects.create(name="treasury")
    treasury.user_set.add(operator, second_operator)
    ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)
    root = User.objects.create_superuser("root", "root@example.com", "root-password")
    mixed, plain = hold("pay 1", approvers=2), hold("pay 2", approvers=2)

    committed(approval_approve, request_id=mixed.pk, user=root, expected_round=1)
    committed(approval_approve, request_id=mixed.pk, user=second_operator, expected_round=1)
    committed(approval_approve, request_id=plain.pk, user=operator, expected_round=1)
    committed(approval_approve, request_id=plain.pk, user=second_operator, expected_round=1)

    def approvals(request: ApprovalRequest) -> list[dict[str, Any]]:
        events = AuditEvent.objects.filter(call_id=request.call_id, event_type="approval.approve").order_by("seq")
        return [event.payload for event in events]

    first, releasing = approvals(mixed)
    assert first.get("superuser_outside_approvers") is True
    assert releasing["approved_by"] == ["root", second_operator.username]
    assert "superuser_outside_approvers" not in releasing  # the decider is one of the approvers
    assert releasing.get("superusers_outside_approvers") == ["root"], releasing
    assert ToolCall.objects.get(pk=mixed.call_id).status == CallStatus.SUCCEEDED
    for payload in approvals(plain):
        assert "superusers_outside_approvers" not in payload
        assert "superuser_outside_approvers" not in payload
    mixed.refresh_from_db()
    assert mixed.status == ApprovalStatus.APPROVED
