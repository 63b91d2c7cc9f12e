"""Review 2026-12-07 p: the policy judged again at execution (review i), tried against its edges.

Findings:

1. A code rule deployed while a call waited was not noticed at execution. ``policy.policy_moved_verdict`` read
   nothing while the call's ``approved_under`` equalled ``decision_stamp`` (governance, plus the tool's code group);
   a tool's code rule (``needs_approval=``) and code risk are its version, not governance, so a worker on code that
   made ``record_effect`` ``needs_approval=True`` or ``high`` ran a call queued as needing no approval under the old
   code. Fixed in the same check: the call is judged again when its tool's version is not the one it was queued with
   (``ToolCall.tool_version``, compared in memory: no statement). Test:
   ``test_a_code_rule_deployed_while_a_call_waits_sends_it_to_the_desk`` (both changes).
2. An external compensation's retry escaped a rule added since it first went out. External calls have no worker;
   ``sagas.compensating._may_ask_again`` re-checks such a call where it goes out again (permissions, the approval
   binding, ``approvals.shortfall``), but not the policy review i made a worker judge again, so a never-held external
   compensation that failed was sent out again, unheld, after an operator added a rule for its tool. It now asks
   ``policy_moved_verdict`` too (an external call carries no stamp: always judged): held now, it is asked anew
   through the pipeline as a new call held for approval. README. Test:
   ``test_an_external_compensation_retried_after_a_rule_for_its_tool_is_held_not_sent_out``.

Checked and holding:
- A call held at execution and approved runs once, as attempt 1: its trail is requested, queued, running (the
  claim), pending_approval (by the worker), then queued again by the release, running, one ``call.succeeded``; a
  duplicate delivery of the first dispatch runs nothing (test).
- A rule added and deleted again before the claim: the stamp moved, the verdict did not; the call runs once, no
  request filed, no send-back (test).
- Approved, then a rule added before the worker ran it: a one-approver rule leaves the call to run on its approval
  (round 1, not asked again); a two-approver rule sends it back for two (``approvals.shortfall``), nothing runs on
  one (test). Approver groups come from the tool's groups, not rules: a group change moves the stamp and the worker
  reads the approvers of now (reviews fp, gm, b).
- Held at execution by a rule asking two approvers: the request asks two (the verdict's terms), one approval
  releases nothing, the second runs it once (test).
- A batch (``WORKER_CLAIM_BATCH=3``) whose middle call a rule holds meanwhile: it goes to the desk, the first and last
  run; none left running (test).
- A saga's compensation held at execution and rejected: the compensation fails, the saga needs attention, the step
  stays succeeded, nothing ran (test); approved, it runs once and compensates (review i's test).
- A run's call held at execution and rejected: the run waits, then answers with the rejection told, the call never
  queued again (test); approved, it completes (review i's test).
- Statement counts: the unchanged path compares a cached ``Tool.version`` with the row's column, no read; the
  query-count tests (tests/approvepath, governance/test_changes_seen_at_once.py, test_governance_cache.py,
  unit/test_claim_hints.py, test_audit_writes.py, posture/test_api_query_counts.py) pass unchanged.
- Left, noted: a callable code rule whose body changes under the same qualified name is no new version (nothing to
  compare), and a rule source registered outside the approvals app whose inputs are not governance rows moves no
  stamp: the worker re-judges neither unless something else moved. An external call never held that already went out
  is not recalled (as a running call is not stopped).
"""

import dataclasses
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.models import AgentRun, RunStatus
from approvals.models import ApprovalRequest, ApprovalRule
from approvals.services import approval_approve, approval_reject
from tests.approvals.released import run_held, sent_back
from tests.helpers import RequestCall, event_types, for_a_worker
from tests.security_review.conftest import client_for, rolled_back_step
from tests.security_review.test_review_2026_12_07_i import _queued, _rolled_back_for_a_worker
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub import Param, Tool, governance, tool
from toolhub.execution import tool_call_execute
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import compensation_retry
from toolhub.tasks import execute_tool_call_task
from toolhub.tools.definition import Risk
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

#: An external compensation that needs no approval by its risk: the carrier's system posts its result.
UNSEAL = Tool.external(
    "review_p_unseal",
    "Unseal a container (done by the port's system, which posts the result).",
    {"type": "object", "properties": {"box": {"type": "string"}}, "required": ["box"]},
    idempotent=True,
    risk="low",
)


@tool(
    risk="low",
    compensate_with="review_p_unseal",
    compensation_mapping=lambda arguments, result: {"box": arguments["box"]},
)
def review_p_seal(box: Annotated[str, Param("The container to seal.")]) -> dict:
    """Seal a container."""
    return {"box": box}


@pytest.fixture
def seal_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    with registry.temporarily(UNSEAL, review_p_seal):
        yield


def _deployed(monkeypatch: pytest.MonkeyPatch, name: str, **changes: Any) -> None:
    """The worker's code declares tool ``name`` otherwise (a deploy while the call waited): ``changes``."""
    monkeypatch.setitem(registry._tools, name, dataclasses.replace(registry.get(name), **changes))
    monkeypatch.setattr(governance, "_current", governance._Cache(None))


@pytest.mark.parametrize("changes", [{"needs_approval": True}, {"risk": Risk.HIGH}], ids=["needs_approval", "risk"])
def test_a_code_rule_deployed_while_a_call_waits_sends_it_to_the_desk(
    alice: User,
    operator: User,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    changes: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a call of ``record_effect`` queued as needing no approval ran on a worker whose code holds every call
    of the tool (``needs_approval=True``, or its code risk raised to ``high``): the worker compared only the
    governance stamp, which a code change does not move (a tool's code rule and risk are its version).
    Expect: the worker sends it to the desk (the tool changed since the call was queued), nothing runs, and an
    operator's approval runs it once."""
    committed = django_capture_on_commit_callbacks
    call, callbacks = _queued(alice, "deployed", committed)
    _deployed(monkeypatch, "record_effect", **changes)
    run_held(callbacks, committed)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL, (call.status, call.error)
    assert SideEffect.objects.count() == 0
    assert "policy changed after the call was queued" in sent_back(call.pk)["reason"]
    request = ApprovalRequest.objects.get(call=call)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert SideEffect.objects.count() == 1


def test_a_call_held_at_execution_then_approved_runs_once_with_its_whole_trail(
    alice: User, operator: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Expect (holds): a call held by the worker and approved runs exactly once; its trail says so in order: queued
    by the policy, claimed, sent to the desk by the worker, released by the operator's approval, claimed again as
    its first attempt and succeeded (one ``call.succeeded``, one side effect, attempt 1)."""
    committed = django_capture_on_commit_callbacks
    call, callbacks = _queued(alice, "trail", committed)
    ApprovalRule.objects.create(name="stop record_effect", tool_name="record_effect")
    run_held(callbacks, committed)
    request = ApprovalRequest.objects.get(call=call)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1), (call.status, call.error)
    assert SideEffect.objects.count() == 1
    trail = event_types(call)
    assert trail[:4] == ["call.requested", "call.queued", "call.running", "call.pending_approval"], trail
    assert trail.count("call.running") == 2 and trail.count("call.succeeded") == 1, trail
    assert trail[-1] == "call.succeeded", trail
    assert trail.index("call.pending_approval") < trail.index("call.queued", 2) < trail.index("call.running", 3)
    # Delivered again (a duplicate message of the first dispatch): nothing runs twice.
    run_held(callbacks, committed)
    assert SideEffect.objects.count() == 1
    assert ToolCall.objects.get(pk=call.pk).attempts == 1


def test_a_rule_added_and_removed_while_a_call_waits_runs_it_without_a_hold(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Expect (holds): a rule for the call's tool added and deleted again before the worker claims the call moves
    the stamp twice; the worker judges the call again, nothing holds it, and it runs once with no request filed."""
    committed = django_capture_on_commit_callbacks
    call, callbacks = _queued(alice, "back and forth", committed)
    rule = ApprovalRule.objects.create(name="briefly", tool_name="record_effect")
    rule.delete()
    run_held(callbacks, committed)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1), (call.status, call.error)
    assert SideEffect.objects.count() == 1
    assert not ApprovalRequest.objects.filter(call=call).exists()
    assert "call.pending_approval" not in event_types(call)


def test_a_held_call_approved_before_a_new_rule_runs_on_its_approval(
    alice: User, operator: User, tenant: Tenant, request_call: RequestCall, django_capture_on_commit_callbacks: Any
) -> None:
    """Expect (holds, README "Nor does the worker read the approvals ..."): a call of ``risky_effect`` approved
    by an operator, then a one-approver rule for its tool added before the worker runs it: the stamp moved, the
    worker reads its approvals (one, still counting, as many as any rule asks) and runs it once, not asking again;
    a two-approver rule instead sends it back for a second approval (not run on one)."""
    committed = django_capture_on_commit_callbacks
    with for_a_worker():
        once = request_call("risky_effect", {"note": "one"}, alice, tenant="acme")
        twice = request_call("risky_effect", {"note": "two"}, alice, tenant="acme")
    released: list[Callable[[], Any]] = []
    for call in (once, twice):
        request = ApprovalRequest.objects.get(call=call)
        with committed(execute=False) as callbacks:
            approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
        released += callbacks
    ApprovalRule.objects.create(
        name="one approver", tool_name="risky_effect", argument="note", operator="==", value="one"
    )
    ApprovalRule.objects.create(
        name="two approvers",
        tool_name="risky_effect",
        argument="note",
        operator="==",
        value="two",
        required_approvals=2,
    )
    run_held(released, committed)
    once.refresh_from_db()
    twice.refresh_from_db()
    assert (once.status, once.attempts) == (CallStatus.SUCCEEDED, 1), (once.status, once.error)
    assert ApprovalRequest.objects.get(call=once).round == 1
    assert twice.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=twice).required_approvals == 2
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["one"]


def test_a_batch_runs_its_other_calls_when_one_is_held_at_execution(
    alice: User, tenant: Tenant, settings: Any, request_call: RequestCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expect (holds): three queued calls claimed in one batch (``WORKER_CLAIM_BATCH``), a rule added meanwhile
    holding the middle one only: it goes to the desk, the first and the last run and succeed; none is left
    ``running``."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 3}
    monkeypatch.setattr("toolhub.pipeline.dispatch_call", lambda call: None)  # this process is the worker
    with for_a_worker():
        calls = [request_call("record_effect", {"note": note}, alice, tenant="acme") for note in ("a", "hold", "c")]
    assert all(call.status == CallStatus.QUEUED for call in calls)
    ApprovalRule.objects.create(
        name="hold one", tool_name="record_effect", argument="note", operator="==", value="hold"
    )
    tool_call_execute(call_id=calls[0].id, worker="w1")
    for call in calls:
        call.refresh_from_db()
    assert [call.status for call in calls] == [CallStatus.SUCCEEDED, CallStatus.PENDING_APPROVAL, CallStatus.SUCCEEDED]
    assert sorted(SideEffect.objects.values_list("note", flat=True)) == ["a", "c"]
    assert ApprovalRequest.objects.get(call=calls[1]).status == "pending"


def test_a_compensation_held_at_execution_and_rejected_settles_its_saga(
    alice: User, acme_operator: User, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Expect (holds): a saga's compensation sent to the desk by its worker (a rule added for its tool after the
    rollback queued it) and then rejected by an operator does not leave the saga compensating: the compensation
    fails, the saga needs attention, the step is not compensated, nothing ran."""
    committed = django_capture_on_commit_callbacks
    client = client_for(alice)
    step_id, dispatched = _rolled_back_for_a_worker(client, "saga-p1", monkeypatch, committed)
    ApprovalRule.objects.create(name="hold undo_saga_step", tool_name="undo_saga_step")
    with committed(execute=True):
        execute_tool_call_task(dispatched[0][0], hint=dispatched[0][1])
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="undo_saga_step")
    assert call.status == CallStatus.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(call=call)
    with committed(execute=True):
        approval_reject(request_id=request.pk, user=acme_operator, comment="not now")
    call.refresh_from_db()
    assert call.status == CallStatus.REJECTED
    assert Compensation.objects.get(call=call).status == CompensationStatus.FAILED
    assert Saga.objects.get(key="saga-p1").status == SagaStatus.NEEDS_ATTENTION
    assert ToolCall.objects.get(pk=step_id).status == CallStatus.SUCCEEDED
    assert not SideEffect.objects.filter(tool="undo_saga_step").exists()


def test_an_external_compensation_retried_after_a_rule_for_its_tool_is_held_not_sent_out(
    seal_tools: None,
    acme_operator: User,
    tenant: Tenant,
    roles: dict[str, Group],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an external compensation (no worker: the outside system acts on it) went out needing no approval and
    failed; an operator then added a rule for its tool, and a retry sent the same call out again, unjudged: the
    retry re-checks an external call's permissions and approvals where it goes out (``_may_ask_again``, as a worker
    would), but not the policy review i made a worker judge again.
    Expect: the retry asks anew through the pipeline: a new call held for approval, the old one not sent out."""
    committed = django_capture_on_commit_callbacks
    port = make_user("acme-operator-p2", tenant=tenant, staff=True, groups=(roles["operators"],))
    step = rolled_back_step(acme_operator, "box-p1", "review_p_seal", {"box": "B-1"}, committed)
    first = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_p_unseal")
    assert first.status == CallStatus.AWAITING_RESULT and not first.approval_hash
    with committed(execute=True):
        answered = client_for(port).post(f"/api/v1/calls/{first.id}/result/", {"error": "jammed"}, format="json")
    assert answered.status_code == 200, answered.content
    compensation = Compensation.objects.get(step_call=step)
    assert compensation.status == CompensationStatus.FAILED
    ApprovalRule.objects.create(name="hold review_p_unseal", tool_name="review_p_unseal")
    with committed(execute=True):
        compensation_retry(compensation=compensation, actor="operator:acme-operator", by=acme_operator)
    first.refresh_from_db()
    assert first.status == CallStatus.FAILED, "the external call went out again without the rule's approval"
    compensation.refresh_from_db()
    assert compensation.call_id != first.id
    held = ToolCall.objects.get(pk=compensation.call_id)
    assert held.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=held).status == "pending"


def test_a_runs_call_held_at_execution_and_rejected_lets_the_run_answer(
    alice: User,
    operator: User,
    make_agent: Any,
    start: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a run's queued call sent to the desk by its worker waits with its run (``waiting``); the
    operator's rejection settles the call ``rejected``, nothing runs, and the run resumes to its answer (the model
    told of the rejection), not left waiting."""
    committed = django_capture_on_commit_callbacks
    dispatched: list[tuple[str, Any]] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda call_id, hint=None: dispatched.append((call_id, hint)))
    monkeypatch.setattr("toolhub.pipeline.runs_in_this_process", lambda: False)  # queued for a worker
    script = [
        {"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "run p"}}]},
        {"content": "not done"},
    ]
    run = start(make_agent(tools=["record_effect"], script=script, tenant="acme"), alice)
    call = ToolCall.objects.get(run_id=run.pk)
    ApprovalRule.objects.create(name="stop record_effect", tool_name="record_effect")
    with committed(execute=True):
        execute_tool_call_task(dispatched[0][0], hint=dispatched[0][1])
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    request = ApprovalRequest.objects.get(call=call)
    with committed(execute=True):
        approval_reject(request_id=request.pk, user=operator, comment="no")
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.REJECTED and SideEffect.objects.count() == 0
    assert (run.status, run.output) == (RunStatus.COMPLETED, "not done")
    assert len(dispatched) == 1  # never queued again


def test_a_call_held_at_execution_by_a_two_approver_rule_needs_both(
    alice: User,
    operator: User,
    acme_operator: User,
    tenant: Tenant,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a rule asking two approvers, added while a call waited, holds it at execution on its terms:
    the request asks two, one approval releases nothing, the second runs the call once."""
    committed = django_capture_on_commit_callbacks
    call, callbacks = _queued(alice, "two looks", committed)
    ApprovalRule.objects.create(name="two for record_effect", tool_name="record_effect", required_approvals=2)
    run_held(callbacks, committed)
    request = ApprovalRequest.objects.get(call=call)
    assert request.required_approvals == 2
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator, expected_round=request.round)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1), (call.status, call.error)
    assert SideEffect.objects.count() == 1
