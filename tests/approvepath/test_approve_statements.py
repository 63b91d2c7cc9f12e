"""The approve transaction: one decisions query, then one write for the decision, the request, the call and the audit.

On PostgreSQL that write is one statement: the decision's row, the request's guarded move, the call's release
and both audit events (``writes`` of ``toolhub.audit.audit_call_events``); elsewhere the same in one transaction.
"""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalStatus
from approvals.services import approval_approve, approval_reject
from tests.approvals.conftest import Hold
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import AuditEvent, CallStatus

pytestmark = pytest.mark.django_db

#: Before: 22 (three decisions queries, two audit appends of three statements each, two savepoints).
#: Now: the request row, one decisions query (with the governance stamp), the decider as they are now: their row,
#: permissions and tenants (4, then kept until a governance change), the decision, the request, the call, one
#: audit append (3), and the test's own savepoint and release.
APPROVE_STATEMENTS = 14
#: On PostgreSQL the decision, the request, the call and the append are one statement: 9 in all.
APPROVE_STATEMENTS_POSTGRESQL = 9
#: Each earlier approval of the round is counted only while its giver may still decide: their row and their
#: groups (one prefetch for every approver), their permissions (2) and their tenants, read once per approver
#: (``approvals.deciders.ApproverStanding``).
STANDING_STATEMENTS = 5


def _approve(request_id: int, user: User, **options: object) -> list[str]:
    fresh = User.objects.get(pk=user.pk)  # as a request brings it: no permissions cached
    with CaptureQueriesContext(connection) as captured:
        approval_approve(request_id=request_id, user=fresh, comment="fine", **options)
    return [query["sql"] for query in captured.captured_queries]


def _decision_queries(statements: list[str]) -> list[str]:
    return [sql for sql in statements if sql.startswith("SELECT") and '"approvals_approvaldecision"' in sql]


def _head_advances(statements: list[str]) -> list[str]:
    # alone, or (on PostgreSQL) an upsert in one statement with the call row's change and the events
    return [sql for sql in statements if "toolhub_auditchainhead" in sql and "seq + " in sql]


def _events(call_id: object) -> list[tuple[str, str]]:
    rows = AuditEvent.objects.filter(call_id=call_id).order_by("seq").values_list("event_type", "status")
    return list(rows)


def test_the_deciding_approval_is_one_decisions_query_and_one_audit_append(hold: Hold, operator: User) -> None:
    # given a call held for one approver
    request = hold("pay 5000")

    # when the operator approves it
    statements = _approve(request.pk, operator)

    # then the call is queued, in few statements: one decisions query, one append for both events
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED and request.call.status == CallStatus.QUEUED
    assert len(statements) <= APPROVE_STATEMENTS, "\n".join(statements)
    assert len(_decision_queries(statements)) == 1
    assert len(_head_advances(statements)) == 1
    assert "seq + 2" in _head_advances(statements)[0]
    assert _events(request.call_id) == [
        ("call.requested", "pending_approval"),
        ("call.pending_approval", "pending_approval"),
        ("approval.approve", "queued"),
        ("call.queued", "queued"),
    ]
    assert verify_audit_chains()[1] == []


def test_a_partial_approval_is_audited_alone_and_the_second_one_releases_with_it(
    hold: Hold, operator: User, second_operator: User
) -> None:
    # given a call that needs two approvers
    request = hold("pay 9000", approvers=2)

    # when the first approves, then the second
    first = _approve(request.pk, operator)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and request.call.status == CallStatus.PENDING_APPROVAL
    second = _approve(request.pk, second_operator)

    # then each decision read the decisions once; the second appended its approval with the release
    assert len(_decision_queries(first)) == len(_decision_queries(second)) == 1
    assert len(_head_advances(first)) == len(_head_advances(second)) == 1
    assert len(first) <= APPROVE_STATEMENTS, "\n".join(first)
    assert len(second) <= APPROVE_STATEMENTS + STANDING_STATEMENTS, "\n".join(second)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED and request.call.status == CallStatus.QUEUED
    assert [event for event, _ in _events(request.call_id)][2:] == [
        "approval.approve",
        "approval.approve",
        "call.queued",
    ]
    assert verify_audit_chains()[1] == []


def test_the_same_operator_approving_twice_is_refused_from_the_one_decisions_query(hold: Hold, operator: User) -> None:
    # given a call that needs two approvers, approved once by the operator
    request = hold("pay 9000", approvers=2)
    _approve(request.pk, operator)
    events_before = _events(request.call_id)

    # when the same operator approves again, then it is refused and nothing is recorded
    from toolhub.exceptions import DecisionNotAllowedError

    with pytest.raises(DecisionNotAllowedError, match="second, different operator"):
        _approve(request.pk, operator)
    request.refresh_from_db()
    assert request.decisions.count() == 1 and request.status == ApprovalStatus.PENDING
    assert _events(request.call_id) == events_before


def test_an_edit_that_suffices_releases_in_the_same_append(hold: Hold, operator: User) -> None:
    # given a call held for one approver
    request = hold("pay 5000")

    # when the operator edits the arguments (which is their approval of the new version)
    statements = _approve(request.pk, operator, arguments={"note": "pay 4000"}, expected_round=1)

    # then the edited version is queued, the edit and the release audited in one append
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert request.call.status == CallStatus.QUEUED and request.call.arguments == {"note": "pay 4000"}
    assert len(_decision_queries(statements)) == 1 and len(_head_advances(statements)) == 1
    assert [event for event, _ in _events(request.call_id)][2:] == ["approval.edit", "call.queued"]
    assert verify_audit_chains()[1] == []


def _writes(statements: list[str]) -> list[str]:
    return [sql for sql in statements if not sql.startswith(("SELECT", "SAVEPOINT", "RELEASE"))]


@pytest.mark.postgres
def test_on_postgresql_the_decision_the_request_and_the_release_are_one_statement(hold: Hold, operator: User) -> None:
    # given a call held for one approver
    request = hold("pay 5000")

    # when the operator approves it
    statements = _approve(request.pk, operator)

    # then one statement wrote the decision, moved the request, released the call and appended both events
    assert len(statements) <= APPROVE_STATEMENTS_POSTGRESQL, "\n".join(statements)
    (write,) = _writes(statements)
    assert 'INSERT INTO "approvals_approvaldecision"' in write and 'UPDATE "approvals_approvalrequest"' in write
    assert 'UPDATE "toolhub_toolcall"' in write and "toolhub_auditchainhead" in write
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED and request.decided_at is not None
    (decision,) = request.decisions.all()
    assert (decision.decision, decision.decided_by_id, decision.round) == ("approve", operator.pk, 1)
    assert decision.arguments_hash == request.arguments_hash and decision.comment == "fine"
    assert request.call.status == CallStatus.QUEUED
    assert verify_audit_chains()[1] == []


@pytest.mark.postgres
def test_on_postgresql_a_rejection_is_one_write_with_both_events(hold: Hold, operator: User) -> None:
    # given a call held for one approver
    request = hold("pay 5000")

    # when the operator rejects it
    fresh = User.objects.get(pk=operator.pk)
    with CaptureQueriesContext(connection) as captured:
        approval_reject(request_id=request.pk, user=fresh, comment="not today")
    statements = [query["sql"] for query in captured.captured_queries]

    # then the decision, the request's move, the call's refusal and both events were one statement
    (write,) = _writes(statements)
    assert 'INSERT INTO "approvals_approvaldecision"' in write and 'UPDATE "toolhub_toolcall"' in write
    request.refresh_from_db()
    assert request.status == ApprovalStatus.REJECTED and request.decisions.get().decision == "reject"
    assert request.call.status == CallStatus.REJECTED
    assert request.call.error == "Rejected by operator: not today"
    assert [event for event, _ in _events(request.call_id)][2:] == ["approval.reject", "call.rejected"]
    assert verify_audit_chains()[1] == []


def test_a_rejection_of_a_call_that_left_its_wait_is_still_recorded_and_audited(hold: Hold, operator: User) -> None:
    # given a held call that was cancelled meanwhile (it no longer waits for approval)
    request = hold("pay 5000")
    from toolhub.models import ToolCall

    ToolCall.objects.filter(pk=request.call_id).update(status=CallStatus.CANCELLED)

    # when the operator rejects the request
    approval_reject(request_id=request.pk, user=User.objects.get(pk=operator.pk), comment="late")

    # then the decision and the request's end are kept, the rejection is audited, the call is left as it was
    request.refresh_from_db()
    assert request.status == ApprovalStatus.REJECTED and request.decisions.get().decision == "reject"
    assert request.call.status == CallStatus.CANCELLED
    assert [event for event, _ in _events(request.call_id)][2:] == ["approval.reject"]
    assert verify_audit_chains()[1] == []


def test_a_request_move_that_misses_rolls_the_whole_decision_back(
    hold: Hold, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a held call, and a request move that touches no row (as a lost race would; the lock prevents it)
    from approvals import services
    from toolhub.exceptions import AlreadyDecidedError

    request = hold("pay 5000")
    events_before = _events(request.call_id)
    real = services.decided_row

    def lost_race(*args: object, **values: object) -> tuple[str, list[object]]:
        sql, params = real(*args, **values)  # type: ignore[arg-type]
        return f"{sql} AND false", params

    monkeypatch.setattr(services, "decided_row", lost_race)

    # when the operator approves, then it is refused and nothing of the decision is kept
    with pytest.raises(AlreadyDecidedError, match="nothing was changed"):
        _approve(request.pk, operator)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and not request.decisions.exists()
    assert request.call.status == CallStatus.PENDING_APPROVAL
    assert _events(request.call_id) == events_before
    assert verify_audit_chains()[1] == []
