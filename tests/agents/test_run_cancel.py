"""Cancelling a run: by its user or an operator of its tenant (API, admin), and by governance when its user leaves.

A cancelled run asks its model nothing more, and withdraws what it asked for that has not started: a held call
with its approval request (no operator can approve it any more), a queued call (no worker runs it). Each
cancellation is audited with who and why. Bad input cancels nothing.
"""

import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client

from agents_app.cancelling import run_cancel
from agents_app.loop import run_advance
from agents_app.models import Agent, AgentRun, RunStatus, StopReason
from agents_app.services import RunInputError, agent_create, run_cancel_by, run_start
from approvals import signals as approval_signals
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from demo.models import Account
from tests.agents.conftest import client_for
from tests.helpers import assert_audit_intact
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub.celery import app as celery_app
from toolhub.models import AuditEvent, CallKind, CallStatus, Tenant, TenantMembership, ToolCall
from toolhub.tasks import execute_tool_call_task

pytestmark = pytest.mark.django_db

StartRun = Callable[..., AgentRun]

#: A held call first (risky_effect waits for an operator), then an effect, then the answer.
HELD_THEN_EFFECT = [
    {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
    {"tool_calls": [{"name": "record_effect", "arguments": {"note": "after"}}]},
    {"content": "done"},
]


def _agent(name: str, script: list[dict[str, Any]], tenant: str = "acme") -> Agent:
    return agent_create(
        name=name, provider="scripted", tools=["risky_effect", "record_effect"], tenant=tenant, script=script
    )


def _waiting_run(start_run: StartRun, user: User, tenant: str = "acme") -> AgentRun:
    """A run of ``user`` waiting for an operator on its first call."""
    run = start_run(_agent(f"held-{tenant}", HELD_THEN_EFFECT, tenant), user, context={"tenant": tenant})
    assert run.status == RunStatus.WAITING
    return run


def _cancel(user: User, run: AgentRun, body: Any = None) -> Any:
    return client_for(user).post(f"/api/v1/runs/{run.pk}/cancel/", body or {}, format="json")


def _run_events(run: AgentRun) -> list[tuple[str, str]]:
    return list(AuditEvent.objects.filter(run_id=run.pk).order_by("id").values_list("event_type", "actor"))


def test_its_user_cancels_a_waiting_run_and_its_held_call_is_withdrawn(
    start_run: StartRun, alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _waiting_run(start_run, alice)
    held = ApprovalRequest.objects.get(call__run_id=run.pk)
    withdrawn: list[dict[str, Any]] = []

    def on_cancelled(sender: Any, request: ApprovalRequest, signal: Any, **kwargs: Any) -> None:
        withdrawn.append({"request": request.pk, **kwargs})

    approval_signals.approval_cancelled.connect(on_cancelled, weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = _cancel(alice, run, {"reason": "wrong customer"})
    finally:
        approval_signals.approval_cancelled.disconnect(on_cancelled)

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["stop_reason"]) == ("cancelled", "cancelled")
    assert body["error"] == "Cancelled by user:alice: wrong customer"
    held.refresh_from_db()
    assert held.status == ApprovalStatus.CANCELLED and held.decided_at is not None
    call = ToolCall.objects.get(pk=held.call_id)
    assert call.status == CallStatus.CANCELLED
    assert call.error == "Not executed: its run was cancelled by user:alice: wrong customer"
    assert withdrawn == [{"request": held.pk, "reason": "its run was cancelled by user:alice: wrong customer"}]
    # no operator can approve it any more, and nothing ran
    approved = client_for(acme_operator).post(f"/api/v1/approvals/{held.pk}/approve/", {"round": 1}, format="json")
    assert approved.status_code == 409 and "already cancelled" in approved.json()["detail"]
    assert not SideEffect.objects.exists()
    assert AgentRun.objects.get(pk=run.pk).turn == 1  # the model was asked once, before the cancellation
    assert ("run.cancelled", "user:alice") in _run_events(run)
    assert AuditEvent.objects.get(run_id=run.pk, event_type="run.cancelled").payload == {"reason": "wrong customer"}
    assert [e for e, _ in _run_events(run) if e in ("approval.cancelled", "call.cancelled")] == [
        "approval.cancelled",
        "call.cancelled",
    ]
    assert_audit_intact()


def test_an_operator_of_its_tenant_cancels_it_and_nobody_else_can(
    start_run: StartRun, alice: User, carol: User, acme_operator: User, acme_auditor: User, globex_operator: User
) -> None:
    run = _waiting_run(start_run, alice)

    assert _cancel(acme_auditor, run).status_code == 403  # sees it, changes nothing
    assert _cancel(carol, run).status_code == 404  # a colleague does not see alice's run
    assert _cancel(globex_operator, run).status_code == 404  # another tenant's
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert ApprovalRequest.objects.get(call__run_id=run.pk).status == ApprovalStatus.PENDING
    assert not AuditEvent.objects.filter(run_id=run.pk, event_type="run.cancelled").exists()

    response = _cancel(acme_operator, run)

    assert response.status_code == 200, response.content
    assert response.json()["error"] == "Cancelled by user:acme-operator: no reason given"


def test_a_run_that_ended_is_not_cancelled(start_run: StartRun, alice: User) -> None:
    run = start_run(_agent("answers", [{"content": "hello"}]), alice)
    assert run.status == RunStatus.COMPLETED

    response = _cancel(alice, run, {"reason": "too late"})

    assert response.status_code == 409
    assert response.json()["detail"] == (
        "Only a run still going (running or waiting) can be cancelled; this one is completed."
    )
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert not AuditEvent.objects.filter(run_id=run.pk, event_type="run.cancelled").exists()


def test_a_run_cancelled_once_answers_conflict_the_second_time(start_run: StartRun, alice: User) -> None:
    run = _waiting_run(start_run, alice)
    assert _cancel(alice, run).status_code == 200

    again = _cancel(alice, run, {"reason": "again"})

    assert again.status_code == 409 and "this one is cancelled" in again.json()["detail"]
    assert AuditEvent.objects.filter(run_id=run.pk, event_type="run.cancelled").count() == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"reason": "x" * 501}, "no more than 500 characters"),
        ({"reason": {"nested": "object"}}, "Not a valid string"),
        ({"reason": None}, "may not be null"),
        ({"reason": "a\x00b"}, "reason contains a NUL character"),
    ],
)
def test_a_bad_reason_is_refused_and_nothing_stops(
    start_run: StartRun, alice: User, body: dict[str, Any], problem: str
) -> None:
    run = _waiting_run(start_run, alice)

    response = _cancel(alice, run, body)

    assert response.status_code == 400
    assert problem in str(response.json()), response.json()
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert ApprovalRequest.objects.get(call__run_id=run.pk).status == ApprovalStatus.PENDING
    assert not AuditEvent.objects.filter(run_id=run.pk, event_type="run.cancelled").exists()


def test_a_reason_no_column_can_store_is_refused_by_the_service_too(start_run: StartRun, alice: User) -> None:
    """The REST parser refuses such a body first; the service refuses it for the admin and other callers."""
    run = _waiting_run(start_run, alice)

    with pytest.raises(RunInputError, match="Nothing was cancelled: the reason contains"):
        run_cancel_by(run=run, user=alice, reason="a \udfff b")

    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert ApprovalRequest.objects.get(call__run_id=run.pk).status == ApprovalStatus.PENDING


def test_a_queued_call_not_yet_claimed_never_runs(
    alice: User, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """At most once: the call's message reaches a worker after the cancellation; its claim finds it cancelled."""
    agent = _agent("effect", [{"tool_calls": [{"name": "record_effect", "arguments": {"note": "x"}}]}])
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(agent=agent, user=alice, input="go")
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda *args, **kwargs: sent.append((args, kwargs)))
    celery_app.conf.task_always_eager = False  # the call goes to a (stand-in) broker; the fixture restores it
    with django_capture_on_commit_callbacks(execute=True):
        run_advance(run_id=run.pk)
    celery_app.conf.task_always_eager = True
    call = ToolCall.objects.get(run_id=run.pk)
    assert call.status == CallStatus.QUEUED and len(sent) == 1

    with django_capture_on_commit_callbacks(execute=True):
        assert _cancel(alice, run, {"reason": "stop"}).status_code == 200
    args, kwargs = sent[0]
    execute_tool_call_task(*args, **kwargs)  # the worker gets the message now

    call.refresh_from_db()
    assert call.status == CallStatus.CANCELLED and call.started_at is None
    assert call.error == "Not executed: its run was cancelled by user:alice: stop"
    assert not SideEffect.objects.exists()
    assert_audit_intact()


def test_a_rollback_under_way_is_not_withdrawn(
    alice: User, start_run: StartRun, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Cancelling stops what the run would still do, never the undoing of what it did."""
    Account.objects.create(account_id="ACC-ACME", owner="alice", tenant="acme", balance=Decimal("1000"))
    script = [
        {"tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-ACME", "amount": "100"}}]},
        *HELD_THEN_EFFECT,
    ]
    agent = agent_create(
        name="pays", provider="scripted", tools=["debit", "risky_effect", "record_effect"], tenant="acme", script=script
    )
    run = start_run(agent, alice)
    assert run.status == RunStatus.WAITING and Account.objects.get().balance == Decimal("900")
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda *args, **kwargs: sent.append((args, kwargs)))
    celery_app.conf.task_always_eager = False  # the refund goes to a (stand-in) broker; the fixture restores it
    with django_capture_on_commit_callbacks(execute=True):
        rollback = client_for(alice).post(f"/api/v1/runs/{run.pk}/rollback/")
    celery_app.conf.task_always_eager = True
    assert rollback.status_code == 202, rollback.content
    refund = ToolCall.objects.get(run_id=run.pk, kind=CallKind.COMPENSATION)
    assert refund.status == CallStatus.QUEUED and len(sent) == 1
    alone = client_for(alice).post(f"/api/v1/calls/{refund.pk}/cancel/", {}, format="json")
    assert alone.status_code == 409 and alone.json()["detail"].startswith("A saga's compensation is not cancelled")

    with django_capture_on_commit_callbacks(execute=True):
        assert _cancel(alice, run, {"reason": "wrong account"}).status_code == 200
        assert ToolCall.objects.get(pk=refund.pk).status == CallStatus.QUEUED  # left to its worker
        args, kwargs = sent[0]
        execute_tool_call_task(*args, **kwargs)

    assert ToolCall.objects.get(pk=refund.pk).status == CallStatus.SUCCEEDED
    assert Account.objects.get().balance == Decimal("1000")
    assert ApprovalRequest.objects.get(call__run_id=run.pk).status == ApprovalStatus.CANCELLED
    assert_audit_intact()


def test_deactivating_a_user_cancels_their_runs_at_once(
    start_run: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _waiting_run(start_run, alice)

    with django_capture_on_commit_callbacks(execute=True):
        alice.is_active = False
        alice.save()

    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (RunStatus.CANCELLED, StopReason.CANCELLED)
    assert run.error == (
        "Cancelled by governance: The account this call is made for is deactivated; nothing is run in its name."
    )
    assert ApprovalRequest.objects.get(call__run_id=run.pk).status == ApprovalStatus.CANCELLED
    assert ("run.cancelled", "governance") in _run_events(run)


def test_a_login_or_an_unrelated_change_cancels_nothing(
    start_run: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _waiting_run(start_run, alice)

    with django_capture_on_commit_callbacks(execute=True):
        alice.email = "alice@new.example"
        alice.save()
        Client().login(username="alice", password="alice-password")  # writes last_login

    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_removing_a_member_from_one_tenant_cancels_her_runs_there_only(
    start_run: StartRun, alice: User, other_tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    TenantMembership.objects.create(user=alice, tenant=other_tenant)
    in_acme, in_globex = _waiting_run(start_run, alice, "acme"), _waiting_run(start_run, alice, "globex")

    with django_capture_on_commit_callbacks(execute=True):
        TenantMembership.objects.filter(user=alice, tenant__slug="acme").delete()

    assert AgentRun.objects.get(pk=in_acme.pk).status == RunStatus.CANCELLED
    assert "no longer belongs to tenant 'acme'" in AgentRun.objects.get(pk=in_acme.pk).error
    assert AgentRun.objects.get(pk=in_globex.pk).status == RunStatus.WAITING
    assert ApprovalRequest.objects.get(call__run_id=in_globex.pk).status == ApprovalStatus.PENDING


def test_the_loop_stops_a_run_whose_user_was_deactivated_without_signals(
    start_run: StartRun, alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """A bulk update sends no signal: the loop's own check before the model's next turn ends the run."""
    run = _waiting_run(start_run, alice)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    held = ApprovalRequest.objects.get(call__run_id=run.pk)

    with django_capture_on_commit_callbacks(execute=True):
        approved = client_for(acme_operator).post(f"/api/v1/approvals/{held.pk}/approve/", {"round": 1}, format="json")

    assert approved.status_code == 200, approved.content
    assert ToolCall.objects.get(pk=held.call_id).status == CallStatus.DENIED  # checked again where it executes
    run.refresh_from_db()
    assert (run.status, run.turn) == (RunStatus.CANCELLED, 1)  # the model was not asked again
    assert run.error.startswith("Cancelled by governance: The account this call is made for is deactivated")
    assert not SideEffect.objects.exists()
    assert not ToolCall.objects.filter(run_id=run.pk, tool_name="record_effect").exists()


def test_an_operator_cancels_runs_in_the_admin_with_a_reason(
    start_run: StartRun, alice: User, acme_operator: User, globex_operator: User, other_tenant: Tenant
) -> None:
    going = _waiting_run(start_run, alice)
    ended = start_run(_agent("answers", [{"content": "hello"}]), alice)
    bob = make_user("bob", tenant=other_tenant)
    theirs = _waiting_run(start_run, bob, "globex")
    client = Client()
    client.force_login(acme_operator)
    url = "/admin/agents_app/agentrun/"
    selected = {"action": "cancel_selected", "_selected_action": [str(going.pk), str(ended.pk), str(theirs.pk)]}

    confirm = client.post(url, selected)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Cancel 1 run(s)" in page and str(going.pk)[:8] in page and str(theirs.pk)[:8] not in page
    assert AgentRun.objects.get(pk=going.pk).status == RunStatus.WAITING  # nothing before the confirmation
    missing = client.post(url, {**selected, "apply": "1", "reason": ""})
    assert "This field is required" in missing.content.decode()
    assert AgentRun.objects.get(pk=going.pk).status == RunStatus.WAITING

    done = client.post(url, {**selected, "apply": "1", "reason": "looping"}, follow=True)

    assert done.status_code == 200
    shown = done.content.decode()
    assert "Cancelled 1 run(s)." in shown
    assert AgentRun.objects.get(pk=going.pk).error == "Cancelled by user:acme-operator: looping"
    assert AgentRun.objects.get(pk=ended.pk).status == RunStatus.COMPLETED
    assert AgentRun.objects.get(pk=theirs.pk).status == RunStatus.WAITING  # globex's run was never in reach


def test_an_auditor_is_not_offered_the_action(start_run: StartRun, alice: User, acme_auditor: User) -> None:
    run = _waiting_run(start_run, alice)
    client = Client()
    client.force_login(acme_auditor)

    listing = client.get("/admin/agents_app/agentrun/")
    refused = client.post(
        "/admin/agents_app/agentrun/",
        {"action": "cancel_selected", "_selected_action": [str(run.pk)], "apply": "1", "reason": "x"},
    )

    assert listing.status_code == 200 and "cancel_selected" not in listing.content.decode()
    assert refused.status_code in (200, 302)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING


@pytest.mark.postgres  # row locks: SQLite has none
@pytest.mark.django_db(transaction=True)
def test_a_cancellation_racing_an_approval_waits_for_it_and_leaves_one_consistent_outcome(
    start_run: StartRun, alice: User, acme_operator: User
) -> None:
    """The cancellation locks the run, then waits for the request the operator is deciding; once the approval
    commits it finds the request decided and leaves the released call to its worker. No deadlock, nothing lost."""
    run = _waiting_run(start_run, alice)
    held = ApprovalRequest.objects.get(call__run_id=run.pk)
    outcome: dict[str, Any] = {}

    def cancel() -> None:
        try:
            outcome["cancelled"] = run_cancel(run_id=run.pk, actor="user:alice", reason="changed my mind")
        finally:
            connection.close()

    with transaction.atomic():
        ApprovalRequest.objects.select_for_update().get(pk=held.pk)  # the operator's decision holds the request
        racer = threading.Thread(target=cancel)
        racer.start()
        racer.join(timeout=1)
        assert racer.is_alive(), "the cancellation must wait for the decision's lock"
        approval_approve(request_id=held.pk, user=acme_operator)
    racer.join(timeout=30)

    assert outcome["cancelled"] is True
    run.refresh_from_db()
    assert (run.status, run.turn) == (RunStatus.CANCELLED, 1)
    assert ApprovalRequest.objects.get(pk=held.pk).status == ApprovalStatus.APPROVED
    call = ToolCall.objects.get(pk=held.call_id)
    # approved first: the call ran once, or was withdrawn before a worker claimed it; never both, never twice
    assert call.status in (CallStatus.SUCCEEDED, CallStatus.CANCELLED)
    assert SideEffect.objects.filter(tool="risky_effect").count() == (call.status == CallStatus.SUCCEEDED)
    assert not ToolCall.objects.filter(run_id=run.pk, tool_name="record_effect").exists()
    assert_audit_intact()
