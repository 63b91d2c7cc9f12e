"""Review 2026-12-06 dw: four eyes: whoever set a call in motion in another's name may not approve it.

Each finding's test failed on the code as found (main at 954c1d1) and passes now.

Findings:

1. An operator who retried a member's failed run (``POST /api/v1/runs/{id}/retry/``, ``agents_app.services.run_retry``)
   could approve the calls the model made next: they run in the member's name, so the requester check did not bar
   the operator who set them in motion, while for a compensation whoever asked for it is barred
   (``ApprovalRequest.askers``). A retry by anyone but the run's user now records them on the run
   (``AgentRun.retried_by``), and a call's approval request takes them among its askers (the ``call_askers`` signal,
   answered by ``agents_app.receivers``): the decision is refused ("You asked for this call ... retried its run"),
   in the API's 403, on the desk and in the approvers list and e-mails (``approvers_of`` excludes askers); the
   ``run.retried`` event names who retried.
2. The same through a subagent: the operator's retry of a parent run set its child run's calls in motion too
   (the child runs in the member's name); a child takes its parent's retriers when it starts
   (``agents_app.subagents``), read under the parent's lock.
3. Review bx had recorded the retry as holding ("the retrying operator may" approve, a retry choosing no call); its
   test now expects the rule above: whoever retried set the calls in motion, as for a compensation's retry.

Checked and holding (read in the code, and by the suites named):
- rollback: an operator's rollback of a run passes ``by`` to its sagas (and its subagents'), so they are askers of
  those compensations (``compensation_askers``; reviews am, bx, dp);
- a saga's manual compensation retry and "compensate the held step": ``Compensation.retried_by`` (review am);
- the desk edit: README promises the editor's approval counts once in the new round, judged again by the policy
  (an edit into a call needing more approvers is not released alone); that is what ``_edit`` does (reviews af, s);
- re-dispatch of a stale call (``calls_redispatch_stale``) and the sagas' sweeper retries are automatic: nobody sets
  them in motion, nobody is added; an idempotent replay of ``POST /calls/`` answers the same call, same requester;
- resume: a run resumes when its held call is decided or its external result arrives; the decider reviewed that
  call, the next calls are the model's in the run's user's name (no person asked for them);
- no run is started in someone else's name: ``run_start`` takes the request's user, so there is no operator-created
  scheduled run (no schedule of runs exists; beat runs only the audit checkpoint and sweeps), and an agentic tool
  an operator calls runs its inner calls as the operator, who is the requester and barred as such;
- the run's own user retrying adds nobody (they are already its requester).
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.models import AgentRun, RunStatus, StopReason
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import approvers_of
from tests.security_review.conftest import client_for
from tests.subagents.conftest import MakeAgent
from tests.tenancy.conftest import make_user
from tests.testapp.tools import ask_researcher
from toolhub import registry
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall

pytestmark = pytest.mark.django_db

ORDER = [
    {"content": "", "tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"content": "Order placed: {last_tool_result}"},
]
ASK = [
    {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "order a laptop"}}]},
    {"content": "Parent got: {last_tool_result}"},
]


def _failed_run(agent: Any, user: User) -> AgentRun:
    """``user``'s run of ``agent`` that failed on its first model turn for a retryable reason (endpoint down)."""
    return AgentRun.objects.create(
        agent=agent,
        user=user,
        tenant="acme",
        input="go",
        messages=[{"role": "user", "content": "go"}],
        status=RunStatus.FAILED,
        stop_reason=StopReason.MODEL_ERROR,
        error="The model endpoint was unreachable.",
        retryable=True,
    )


@pytest.fixture
def capture(django_capture_on_commit_callbacks: Any) -> Any:
    """Commit callbacks run (the run's next step, the released call) as they would after a commit."""
    return django_capture_on_commit_callbacks


@pytest.fixture
def operators(tenant: Tenant, roles: dict[str, Group]) -> tuple[User, User]:
    """Two operators of acme: one retries, the other is the second pair of eyes."""
    return tuple(  # type: ignore[return-value]
        make_user(name, tenant=tenant, staff=True, groups=(roles["operators"],)) for name in ("op-retry", "op-other")
    )


def _held_after_retry(run: AgentRun, retrier: User, capture: Any) -> ApprovalRequest:
    with capture(execute=True):
        retried = client_for(retrier).post(f"/api/v1/runs/{run.id}/retry/")
    assert retried.status_code == 200, retried.content
    call = ToolCall.objects.get(tool_name="create_order", user=run.user)
    assert call.status == CallStatus.PENDING_APPROVAL, call.status
    return ApprovalRequest.objects.get(call=call)


def test_an_operator_who_retried_a_members_run_cannot_approve_its_next_call(
    alice: User, operators: tuple[User, User], make_agent: MakeAgent, capture: Any
) -> None:
    """Found: an operator retried alice's failed run; the model's next call (held for approval) was requested in
    alice's name, and the same operator approved it alone: 200, the order ran.
    Expect: 403 naming why ("You asked for this call ... retried its run"), the request still pending, the operator
    among its askers (API ``asked_by``, desk), not among its approvers; the other operator approves it."""
    retrier, other = operators
    run = _failed_run(make_agent(tools=["create_order"], script=ORDER), alice)
    request = _held_after_retry(run, retrier, capture)

    with capture(execute=True):
        own = client_for(retrier).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")

    assert own.status_code == 403, f"the operator who retried the run approved its call alone: {own.status_code}"
    assert "You asked for this call" in own.json()["detail"] and "retried its run" in own.json()["detail"]
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert retrier not in approvers_of(request) and other in approvers_of(request)
    assert client_for(other).get(f"/api/v1/approvals/{request.pk}/").json()["asked_by"] == [retrier.username]
    retried = AuditEvent.objects.get(event_type="run.retried", run_id=run.id)
    assert retried.actor == f"user:{retrier.username}"

    desk = Client()
    desk.force_login(retrier)
    page = desk.get(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    assert page.status_code == 200
    assert "retried its run" in page.content.decode()

    with capture(execute=True):
        approved = client_for(other).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert approved.status_code == 200, approved.content
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.SUCCEEDED


def test_an_operator_who_retried_a_parent_run_cannot_approve_its_subagents_call(
    alice: User, operators: tuple[User, User], make_agent: MakeAgent, capture: Any
) -> None:
    """Found: an operator retried alice's failed parent run; its subagent's run (alice's too) asked for an order held
    for approval, and the operator who set it in motion approved it alone.
    Expect: 403; the retrier of the parent run is among the child call's askers."""
    retrier, other = operators
    make_agent(name="researcher", tools=["create_order"], script=ORDER)
    with registry.temporarily(ask_researcher):
        parent = _failed_run(make_agent(tools=["ask_researcher"], script=ASK), alice)
        request = _held_after_retry(parent, retrier, capture)
        assert AgentRun.objects.get(pk=request.call.run_id).parent_run_id == parent.id

        with capture(execute=True):
            own = client_for(retrier).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")

    assert own.status_code == 403, f"the operator who retried the parent approved its child's call: {own.status_code}"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert retrier not in approvers_of(request) and other in approvers_of(request)


def test_the_runs_own_user_retrying_adds_no_asker(alice: User, make_agent: MakeAgent, capture: Any) -> None:
    """Holds: alice retrying her own run is already the requester; the askers stay empty (nothing new to bar)."""
    run = _failed_run(make_agent(tools=["create_order"], script=ORDER), alice)
    request = _held_after_retry(run, alice, capture)
    assert list(request.askers.all()) == []
    assert request.requested_by_id == alice.pk
