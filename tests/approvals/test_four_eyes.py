"""Four eyes through edits: an edit replaces what is approved and opens a new round (services, PostgreSQL)."""

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.services import approval_approve, approval_reject
from tests.approvals.conftest import Hold
from tests.helpers import RequestCall, assert_audit_intact, audit_text, event_types
from tests.testapp.models import SideEffect
from toolhub.audit import REDACTED
from toolhub.exceptions import ApprovalError, ArgumentsChangedError, DecisionNotAllowedError
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import approval_hash

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]


def _call(request: ApprovalRequest) -> ToolCall:
    return ToolCall.objects.get(pk=request.call_id)


def _fresh(request: ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest.objects.get(pk=request.pk)


def test_an_edit_after_an_approval_needs_the_other_approval_again(
    hold: Hold, operator: User, second_operator: User, committed: Committed
) -> None:
    # given a call that needs two approvers, approved once as the model sent it
    request = hold("pay 5000", approvers=2)
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)

    # when the second operator approves with edited arguments
    edited = committed(approval_approve, request_id=request.pk, user=second_operator, arguments={"note": "pay 9000"})

    # then nothing ran: the edit opened round 2, in which only the editor has approved
    assert edited.status == ApprovalStatus.PENDING
    assert (edited.round, edited.arguments) == (2, {"note": "pay 9000"})
    assert _call(request).status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0

    # when the first operator, having seen the edited arguments, approves round 2
    approved = committed(approval_approve, request_id=request.pk, user=operator, expected_round=2)

    # then exactly the edited version runs, once
    assert approved.status == ApprovalStatus.APPROVED
    call = _call(request)
    assert (call.status, call.arguments) == (CallStatus.SUCCEEDED, {"note": "pay 9000"})
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["pay 9000"]
    assert call.approval_hash == approval_hash(call.tool_name, call.tool_version, {"note": "pay 9000"})
    final_round = ApprovalDecision.objects.filter(request=request, round=2)
    assert sorted(final_round.values_list("decided_by_name", "decision")) == [
        ("operator", DecisionKind.APPROVE),
        ("operator2", DecisionKind.EDIT),
    ]
    assert set(final_round.values_list("arguments_hash", flat=True)) == {call.approval_hash}
    assert_audit_intact()


def test_an_edit_first_is_what_the_next_approver_sees_and_approves(
    hold: Hold, operator: User, second_operator: User, committed: Committed
) -> None:
    # given the first operator corrects the call before anyone approved it
    request = hold("pay 5000", approvers=2)
    committed(approval_approve, request_id=request.pk, user=operator, arguments={"note": "pay 500"})

    # then the request now holds the version that will run, and the diff from the model's original
    pending = _fresh(request)
    assert (pending.original_arguments, pending.arguments, pending.round) == (
        {"note": "pay 5000"},
        {"note": "pay 500"},
        2,
    )
    assert pending.arguments_hash == approval_hash("risky_effect", _call(request).tool_version, {"note": "pay 500"})

    # when the second operator approves the version they were shown
    committed(
        approval_approve, request_id=request.pk, user=second_operator, expected_arguments_hash=pending.arguments_hash
    )

    # then the corrected arguments ran
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["pay 500"]
    assert _call(request).arguments == {"note": "pay 500"}


@pytest.mark.parametrize("seen", [{"expected_round": 1}, {"expected_arguments_hash": "hash-of-round-1"}, {}])
def test_approving_a_version_that_is_no_longer_current_is_refused_and_records_nothing(
    hold: Hold, operator: User, second_operator: User, third_operator: User, committed: Committed, seen: dict
) -> None:
    # given an operator who looked at round 1, then another operator edited the call
    request = hold("pay 5000", approvers=2)
    if "expected_arguments_hash" in seen:
        seen = {"expected_arguments_hash": request.arguments_hash}
    committed(approval_approve, request_id=request.pk, user=second_operator, arguments={"note": "pay 9000"})
    before = AuditEvent.objects.count()

    # when the operator approves what they saw (or does not say what they saw)
    with pytest.raises(ArgumentsChangedError, match="review them again"):
        committed(approval_approve, request_id=request.pk, user=operator, **seen)

    # then nothing was recorded and nothing ran
    assert AuditEvent.objects.count() == before
    assert not ApprovalDecision.objects.filter(request=request, decided_by=operator).exists()
    assert _fresh(request).status == ApprovalStatus.PENDING
    assert SideEffect.objects.count() == 0
    # and the current version can still be approved by someone who reviews it
    committed(approval_approve, request_id=request.pk, user=third_operator, expected_round=2)
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["pay 9000"]


def test_a_second_approval_by_the_same_person_in_a_round_is_refused(
    hold: Hold, operator: User, second_operator: User, committed: Committed
) -> None:
    request = hold("pay 5000", approvers=2)
    committed(approval_approve, request_id=request.pk, user=operator, arguments={"note": "pay 10"})

    # the editor's approval counts once: approving their own edit again is refused
    with pytest.raises(DecisionNotAllowedError, match="already approved this version"):
        approval_approve(request_id=request.pk, user=operator, expected_round=2)

    assert ApprovalDecision.objects.filter(request=request).count() == 1
    assert SideEffect.objects.count() == 0
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["pay 10"]


def test_the_requester_can_neither_approve_nor_edit(hold: Hold, operator: User, committed: Committed) -> None:
    request = hold("mine", user=operator)

    with pytest.raises(DecisionNotAllowedError, match="You started this call"):
        approval_approve(request_id=request.pk, user=operator, arguments={"note": "changed"})

    fresh = _fresh(request)
    assert (fresh.round, fresh.arguments, fresh.status) == (1, {"note": "mine"}, ApprovalStatus.PENDING)
    assert not fresh.decisions.exists()


def test_a_rejection_by_anyone_ends_it_even_after_their_own_approval(
    hold: Hold, operator: User, committed: Committed
) -> None:
    # given an operator who gave the first of two approvals
    request = hold("pay 5000", approvers=2)
    committed(approval_approve, request_id=request.pk, user=operator)

    # when they change their mind
    rejected = committed(approval_reject, request_id=request.pk, user=operator, comment="on second thought, no")

    # then the request and the call are rejected, nothing ran
    assert rejected.status == ApprovalStatus.REJECTED
    assert _call(request).status == CallStatus.REJECTED
    assert SideEffect.objects.count() == 0


def test_an_edit_that_changes_nothing_is_a_plain_approval(hold: Hold, operator: User, committed: Committed) -> None:
    request = hold("pay 5000", approvers=2)

    committed(approval_approve, request_id=request.pk, user=operator, arguments={"note": "pay 5000"})

    fresh = _fresh(request)
    assert fresh.round == 1
    assert fresh.decisions.get().decision == DecisionKind.APPROVE


def test_the_trail_records_rounds_versions_and_the_redacted_edit(
    secret_tool: None,
    request_call: RequestCall,
    alice: User,
    operator: User,
    second_operator: User,
    committed: Committed,
) -> None:
    # given a critical call with a secret argument
    call = request_call("rotate_secret", {"username": "bob", "password": "old-secret-1"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    first_hash = request.arguments_hash

    # when one operator approves, the other edits the secret, and the first approves the new version
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    committed(approval_approve, request_id=request.pk, user=second_operator, arguments={"password": "new-secret-2"})
    second_hash = _fresh(request).arguments_hash
    committed(approval_approve, request_id=request.pk, user=operator, expected_arguments_hash=second_hash)

    # then every approval names the round and the version it approved, and the edit its redacted diff
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert call.arguments == {"username": "bob", "password": "new-secret-2"}
    assert SideEffect.objects.get().note == "bob:new-secret-2"
    events = AuditEvent.objects.filter(call_id=call.id, event_type__startswith="approval.").order_by("seq")
    payloads = [(e.event_type, e.actor, e.payload) for e in events]
    assert [(kind, actor, data["round"], data["arguments_hash"]) for kind, actor, data in payloads] == [
        ("approval.approve", "operator:operator", 1, first_hash),
        ("approval.edit", "operator:operator2", 2, second_hash),
        ("approval.approve", "operator:operator", 2, second_hash),
    ]
    edit = payloads[1][2]
    assert edit["previous_arguments_hash"] == first_hash
    assert edit["diff"] == {"password": {"before": REDACTED, "after": REDACTED}}
    assert edit["diff_from_original"] == {"password": {"before": REDACTED, "after": REDACTED}}
    assert "old-secret-1" not in audit_text(call) and "new-secret-2" not in audit_text(call)
    assert event_types(call)[-3:] == ["call.queued", "call.running", "call.succeeded"]
    assert_audit_intact()


def test_a_version_changed_behind_the_approvals_is_not_released(
    hold: Hold, operator: User, committed: Committed
) -> None:
    # given someone changes the version under approval in the database, bypassing the services
    request = hold("pay 5")
    ApprovalRequest.objects.filter(pk=request.pk).update(arguments={"note": "pay 5000000"})

    # when an operator approves the version they were shown
    with pytest.raises(Exception, match="no longer match the version that was approved"):
        committed(
            approval_approve, request_id=request.pk, user=operator, expected_arguments_hash=request.arguments_hash
        )

    # then nothing was recorded and nothing ran
    assert _fresh(request).status == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.filter(request=request).exists()
    assert SideEffect.objects.count() == 0


@pytest.mark.postgres  # row locks: SQLite has none
@pytest.mark.django_db(transaction=True)
def test_an_approval_racing_an_edit_waits_for_it_and_is_refused(
    hold: Hold, operator: User, second_operator: User
) -> None:
    # given an operator who reviewed round 1 of a call that needs two approvers
    request = hold("pay 5000", approvers=2)
    outcome: dict[str, Any] = {}

    def approve_round_one() -> None:
        try:
            approval_approve(request_id=request.pk, user=operator, expected_round=1)
            outcome["result"] = "approved"
        except ArgumentsChangedError as exc:
            outcome["result"] = str(exc)
        finally:
            connection.close()

    # when their approval arrives while another operator's edit holds the request
    with transaction.atomic():
        ApprovalRequest.objects.select_for_update().get(pk=request.pk)
        racer = threading.Thread(target=approve_round_one)
        racer.start()
        racer.join(timeout=1)
        assert racer.is_alive(), "the approval must wait for the edit's lock"
        approval_approve(request_id=request.pk, user=second_operator, arguments={"note": "pay 9000"})
    racer.join(timeout=30)

    # then the approval of the old version is refused; only the editor approved the new one; nothing ran
    assert outcome["result"].startswith("The arguments changed since you looked; review them again")
    fresh = _fresh(request)
    assert (fresh.status, fresh.round) == (ApprovalStatus.PENDING, 2)
    assert list(fresh.decisions.values_list("decided_by_name", "round")) == [("operator2", 2)]
    assert SideEffect.objects.count() == 0


@pytest.mark.parametrize("comment", ["fine\u0000", "fine \udfff"])
def test_a_comment_no_column_can_store_is_refused_and_records_nothing(hold: Hold, operator: User, comment: str) -> None:
    request = hold("pay 5000")

    with pytest.raises(ApprovalError, match="The decision was not recorded: the comment contains"):
        approval_approve(request_id=request.pk, user=operator, comment=comment)
    with pytest.raises(ApprovalError, match="The decision was not recorded: the comment contains"):
        approval_reject(request_id=request.pk, user=operator, comment=comment)

    assert _fresh(request).status == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.exists()
