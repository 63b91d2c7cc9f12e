"""Review fs (2026-12-06): review fl's compensation changes, reviewed hostile: the calls held on behalf of an agentic
compensation (``held_inner_outcome``, ``withdraw_held_inner``, ``_wait_for_held``), ``saga_call_settled`` following
inner calls through ``context.parent_call_id``, ``saga_audit_events`` listing calls through ``context.compensates``,
and who may set those keys.

Each finding's test failed on the code as found (main at fe8d6ff) and passes now.

Findings:

1. A compensation attempt that failed while a call made on its behalf was already running (its held undo approved
   and claimed by a worker while the desk's model went on and ran out of turns) was moved on at once: only calls
   still waiting are withdrawn (``withdraw_held_inner``), the running one was neither withdrawn nor waited for, so the
   compensation was scheduled again (its retry's model asks again: the step undone twice) or counted failed while
   the undo still ran; and once it succeeded, nothing followed (the retry's ``held_inner_outcome`` reads its own
   attempt's calls only). Fixed in the shared mechanism: ``held_inner_outcome`` reads every settled attempt, a
   failed one too; a call still open after the withdrawal keeps the compensation running (``compensation.waiting``),
   and one that succeeded after its failed attempt ended makes the outcome unknown (needs attention, naming it), never
   an automatic retry (``test_a_failed_attempts_running_inner_call_is_waited_for_and_not_retried_over``,
   ``test_a_failed_attempts_running_inner_call_that_fails_lets_the_retry_go``).

2. An inner call held for approval and decided before the desk's model answered (rejected while the model took its
   next turn) was not counted as held: ``held_inner_outcome`` read only the calls not settled when the attempt
   finished, though the model is never told a held call's outcome; the compensation succeeded and the step read
   ``compensated`` with nothing undone. Fixed there: held is also a call whose trail shows it ever waited for an
   approval or an external result (``HELD_STATUSES``)
   (``test_a_held_inner_call_decided_before_its_model_answered_is_the_compensations_outcome``).

Checked and holding (regression tests below where marked):
- Who can set what makes a call "undoing": ``compensates`` is reserved (REST, MCP ``_meta``, a run's context, an
  interaction's context refuse or drop it: review fa's tests); ``kind`` ``inner`` is set only by
  ``toolhub.agentic.inner`` (REST, MCP, adapters pass ``api``/``mcp``/``call``); ``parent_call_id`` and
  ``parent_tool`` are not reserved, and a run's context (or a client's, when an operator allows the key) may carry
  them, but every reader of ``parent_call_id`` requires ``kind=inner`` or ``is_undoing`` first, and an inner call's
  own interaction context overrides them with the outer call's id. So a run or client naming another tenant's (or
  the same tenant's) compensation call in ``parent_call_id`` neither settles nor holds it, nor shows on its saga's
  audit page (``test_a_callers_parent_call_id_neither_settles_nor_holds_another_compensation``,
  ``test_an_inner_call_names_its_outer_call_whatever_the_runs_context_says``).
- Tenant scoping: ``held_inner_outcome``, ``withdraw_held_inner`` and ``saga_audit_events`` read the call's (saga's)
  tenant's rows only (178c281), an inner call's tenant is its outer's principal's.
- Bounds: ``held_inner_outcome`` and ``withdraw_held_inner`` read 200 rows of one attempt, which is ``MAX_CALLS``
  (an agentic tool's inner calls per run of its loop; the attempt is one run, ``started_at`` set by each claim);
  ``saga_audit_events``' 10,000 undoing calls are several steps' compensations at 200 calls an attempt and five
  attempts each, past any saga the samples make (not probed further).
- A held call that never settles: none does for ever: its approval expires (``APPROVAL_TIMEOUT_SECONDS``; review
  fl's test), an external result expires (``EXTERNAL_RESULT_TIMEOUT_SECONDS``; a suspension that never expires is a
  subagent's, refused inside an agentic tool), an approved one lost in the queue is sent again and one whose worker
  died is settled by the lease reconciler. Meanwhile the sweep reads a waiting compensation once per pass, the
  ``limit`` of a pass bounding the work, oldest touched first (a compensation whose outcome was lost, never touched,
  comes before the waiting ones), and says ``compensation.waiting`` once
  (``test_the_sweep_keeps_a_waiting_compensation_waiting_and_says_so_once``).
- ``agentic.model_turn`` (``_RecordedOnCall``): the call's own row names tenant, run and tool (``ctx.call_id`` is
  reserved); its data are token counts and how many tool calls were asked, never text; nothing sums it into a run.
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import override_settings
from django.utils import timezone

from agents_app.services import agent_create
from approvals.models import ApprovalRequest
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.tools import record_effect, risky_effect
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.calls import call_transition
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas import compensating
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.selectors import saga_audit_events
from toolhub.sagas.services import saga_call_settled, saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk_operator(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-fs", tenant=tenant, staff=True, groups=(roles["operators"],))


SHORT_DESK = SimpleAgenticTool(
    "undo_fs_short_desk", "Undo a trip through a held effect.", tools=[risky_effect], max_iterations=1, agent="fs-short"
)


@tool(compensate_with="undo_fs_short_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def reserve_fs_short_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by a desk whose model runs out of turns after asking for a held effect."""
    return {"trip": f"T-{city}"}


def _failed_attempt_with_running_undo(
    alice: User, acme_operator: User, capture: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Compensation, ToolCall]:
    """The desk's model asks for a held undo and runs out of turns; meanwhile an operator approved the held call and a
    worker claimed it: running when the failed attempt's outcome is applied."""
    agent_create(
        name="fs-short",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}],
        tools=[],
    )
    withdraw = compensating.withdraw_held_inner

    def approved_and_claimed_meanwhile(call: ToolCall, actor: str) -> None:
        ToolCall.objects.filter(
            kind=CallKind.INNER, tool_name="risky_effect", status=CallStatus.PENDING_APPROVAL
        ).update(status=CallStatus.RUNNING, worker="worker:w2", started_at=timezone.now(), attempts=1)
        ApprovalRequest.objects.filter(call__tool_name="risky_effect").update(status="approved")
        withdraw(call, actor)

    monkeypatch.setattr(compensating, "withdraw_held_inner", approved_and_claimed_meanwhile)
    with capture(execute=True):
        made = client_for(alice).post(
            "/api/v1/calls/",
            {"tool": "reserve_fs_short_trip", "arguments": {"city": "oslo"}, "saga_id": "fs"},
            format="json",
        )
    step = ToolCall.objects.get(pk=made.json()["id"])
    assert step.status == CallStatus.SUCCEEDED, step.error
    with capture(execute=True):
        saga_rollback_on_demand(saga_key="fs", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.select_related("call", "step_call", "saga").get(step_call=step)
    assert undo.call is not None and undo.call.status == CallStatus.FAILED, undo.call and undo.call.status
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
    assert inner.status == CallStatus.RUNNING
    return undo, inner


def _inner_ends(inner: ToolCall, status: CallStatus, capture: Any) -> None:
    """The worker's outcome of the running inner call, written as the worker writes it (settling notified)."""
    with capture(execute=True):
        assert call_transition(
            inner,
            to=status,
            allowed_from={CallStatus.RUNNING},
            actor="worker:w2",
            finished_at=timezone.now(),
            **({"result": {"effect_id": 1}} if status == CallStatus.SUCCEEDED else {"error": "the effect failed"}),
        )


def test_a_failed_attempts_running_inner_call_is_waited_for_and_not_retried_over(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the attempt failed while its held undo, approved meanwhile, was already running: not withdrawable, it
    was left to run, and the compensation was scheduled again at once (``retry_scheduled``): the retry's model asks
    for the undo again, so the step is undone twice; once the running call succeeded nothing followed it.
    Expect: the compensation waits for it (running, ``compensation.waiting`` naming it); once it succeeded after the
    attempt failed, the compensation's outcome is unknown (an operator decides, naming the call), never an automatic
    retry, and the step is not marked compensated."""
    with registry.temporarily(reserve_fs_short_trip, *SHORT_DESK.__toolhub_tools__()):
        undo, inner = _failed_attempt_with_running_undo(
            alice, acme_operator, django_capture_on_commit_callbacks, monkeypatch
        )
        undo.refresh_from_db()
        assert undo.status == CompensationStatus.RUNNING, (undo.status, undo.last_error)
        assert str(inner.pk) in undo.last_error and "running" in undo.last_error
        _inner_ends(inner, CallStatus.SUCCEEDED, django_capture_on_commit_callbacks)
    undo.refresh_from_db()
    undo.step_call.refresh_from_db()
    assert undo.status == CompensationStatus.UNKNOWN, (undo.status, undo.last_error)
    assert str(inner.pk) in undo.last_error
    assert undo.step_call.status == CallStatus.SUCCEEDED
    assert ToolCall.objects.filter(kind=CallKind.INNER, tool_name="risky_effect").count() == 1


def test_a_failed_attempts_running_inner_call_that_fails_lets_the_retry_go(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (as above) the failed attempt was moved on while its inner call ran.
    Expect: once that call failed too, nothing was undone: the attempt's failure is applied as ever (a retry
    scheduled, its error the attempt's)."""
    with registry.temporarily(reserve_fs_short_trip, *SHORT_DESK.__toolhub_tools__()):
        undo, inner = _failed_attempt_with_running_undo(
            alice, acme_operator, django_capture_on_commit_callbacks, monkeypatch
        )
        undo.refresh_from_db()
        assert undo.status == CompensationStatus.RUNNING, (undo.status, undo.last_error)
        _inner_ends(inner, CallStatus.FAILED, django_capture_on_commit_callbacks)
    undo.refresh_from_db()
    assert undo.status == CompensationStatus.RETRY_SCHEDULED, (undo.status, undo.last_error)


HELD_DESK = SimpleAgenticTool(
    "undo_fs_held_desk", "Undo a trip through a held effect.", tools=[risky_effect], max_iterations=3, agent="fs-held"
)


@tool(compensate_with="undo_fs_held_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def reserve_fs_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by an agentic desk whose effect waits for an operator."""
    return {"trip": f"T-{city}"}


def _held_undo(alice: User, acme_operator: User, capture: Any) -> tuple[Compensation, ToolCall]:
    agent_create(
        name="fs-held",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}, {"content": "asked"}],
        tools=[],
    )
    with capture(execute=True):
        made = client_for(alice).post(
            "/api/v1/calls/", {"tool": "reserve_fs_trip", "arguments": {"city": "oslo"}, "saga_id": "fs"}, format="json"
        )
    step = ToolCall.objects.get(pk=made.json()["id"])
    with capture(execute=True):
        saga_rollback_on_demand(saga_key="fs", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.select_related("call", "step_call", "saga").get(step_call=step)
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
    assert inner.status == CallStatus.PENDING_APPROVAL
    assert undo.status == CompensationStatus.RUNNING
    return undo, inner


def test_a_callers_parent_call_id_neither_settles_nor_holds_another_compensation(
    alice: User,
    acme_operator: User,
    globex_user: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holds: ``parent_call_id`` is no reserved key: an operator may let clients send it, and a run's context may
    carry it. Expect: a call of another tenant's user (or of the same tenant's) naming a waiting compensation's call
    there is no call made on its behalf: its settling does not move that compensation (still waiting on its own held
    call), it is not read as held by it, and it is not on that saga's audit page."""
    from toolhub.models import Grant, GrantEffect

    with registry.temporarily(reserve_fs_trip, record_effect, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        forged = {"parent_call_id": str(undo.call_id), "parent_tool": "undo_fs_held_desk"}
        made = []
        for user, tenant in ((globex_user, "globex"), (alice, "acme")):
            Grant.objects.get_or_create(tool_name="record_effect", user=user, effect=GrantEffect.ALLOW)
            with (
                override_settings(TOOLHUB={"CLIENT_CONTEXT_KEYS": ["parent_call_id", "parent_tool"]}),
                django_capture_on_commit_callbacks(execute=True),
            ):
                answer = client_for(user).post(
                    "/api/v1/calls/",
                    {"tool": "record_effect", "arguments": {"note": "x"}, "context": forged, "tenant": tenant},
                    format="json",
                )
            assert answer.status_code in (200, 201, 202), answer.content
            call = ToolCall.objects.get(pk=answer.json()["id"])
            assert call.status == CallStatus.SUCCEEDED and call.context["parent_call_id"] == str(undo.call_id)
            made.append(call)
            saga_call_settled(call_id=call.pk)
    undo.refresh_from_db()
    assert undo.status == CompensationStatus.RUNNING and str(inner.pk) in undo.last_error, undo.last_error
    assert undo.call is not None
    held = compensating.held_inner_outcome(undo.call)
    assert held is not None and str(inner.pk) in held[1] and all(str(c.pk) not in held[1] for c in made)
    shown = set(saga_audit_events(undo.saga).values_list("call_id", flat=True))
    assert inner.pk in shown and not shown & {c.pk for c in made}


DESK = SimpleAgenticTool("fs_run_desk", "Record a note.", tools=[record_effect], max_iterations=2, agent="fs-inner")


def test_an_inner_call_names_its_outer_call_whatever_the_runs_context_says(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any, start: Any
) -> None:
    """Holds: a run's context is the requester's (``run_start`` refuses only reserved keys) and its calls carry it.
    Expect: a run naming a waiting compensation's call in ``parent_call_id`` (and its desk in ``parent_tool``) makes
    its agentic tool's inner calls name their own outer call, never that one; nothing of the run moves the
    compensation."""
    from agents_app.models import Agent

    with registry.temporarily(reserve_fs_trip, record_effect, DESK, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        agent_create(
            name="fs-inner",
            provider="scripted",
            script=[{"tool_calls": [{"name": "record_effect", "arguments": {"note": "in"}}]}, {"content": "done"}],
            tools=[],
        )
        runner = agent_create(
            name="fs-runner",
            provider="scripted",
            script=[
                {"tool_calls": [{"name": "fs_run_desk", "arguments": {"task": "note"}}]},
                {"content": "finished"},
            ],
            tools=["fs_run_desk"],
        )
        forged = {"parent_call_id": str(undo.call_id), "parent_tool": "undo_fs_held_desk"}
        run = start(Agent.objects.get(pk=runner.pk), alice, context=forged)
    outer = ToolCall.objects.get(run_id=run.id, tool_name="fs_run_desk")
    inner_of_run = ToolCall.objects.get(run_id=run.id, kind=CallKind.INNER)
    assert outer.status == CallStatus.SUCCEEDED, (outer.status, outer.error, run.status)
    assert inner_of_run.context["parent_call_id"] == str(outer.pk), json.dumps(inner_of_run.context)
    assert inner_of_run.context["parent_tool"] == "fs_run_desk"
    undo.refresh_from_db()
    assert undo.status == CompensationStatus.RUNNING and str(inner.pk) in undo.last_error


def test_a_held_inner_call_decided_before_its_model_answered_is_the_compensations_outcome(
    alice: User,
    acme_operator: User,
    desk_operator: User,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: the desk's model is told its held undo "runs once approved" and is never told more; an operator rejected
    it while the model took its next turn, the model answered, and the compensation succeeded, the step
    ``compensated``: ``held_inner_outcome`` counted as held only the calls not settled when the attempt finished.
    Expect: a call held when its model was answered is the compensation's outcome whenever it settled: rejected, the
    compensation fails naming it, and the step stays done."""
    from approvals.services import approval_reject
    from toolhub.agentic import inner as inner_module

    asked = inner_module.inner_tool_call

    def rejected_meanwhile(*args: Any, **kwargs: Any) -> ToolCall:
        call = asked(*args, **kwargs)
        if call.status == CallStatus.PENDING_APPROVAL:
            request = ApprovalRequest.objects.get(call=call)
            approval_reject(request_id=request.pk, user=desk_operator, comment="no")
        return call

    monkeypatch.setattr(inner_module, "inner_tool_call", rejected_meanwhile)
    with registry.temporarily(reserve_fs_trip, *HELD_DESK.__toolhub_tools__()):
        agent_create(
            name="fs-held",
            provider="scripted",
            script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}, {"content": "asked"}],
            tools=[],
        )
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "reserve_fs_trip", "arguments": {"city": "oslo"}, "saga_id": "fs"},
                format="json",
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="fs", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.select_related("call").get(step_call=step)
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
    assert inner.status == CallStatus.REJECTED
    assert undo.call is not None and undo.call.status == CallStatus.SUCCEEDED
    step.refresh_from_db()
    assert undo.status == CompensationStatus.FAILED, (undo.status, undo.last_error)
    assert str(inner.pk) in undo.last_error and "rejected" in undo.last_error
    assert step.status == CallStatus.SUCCEEDED


def test_the_sweep_keeps_a_waiting_compensation_waiting_and_says_so_once(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holds: a compensation waiting on a call held on its behalf is read by every sweep (its call is settled). Expect:
    each pass leaves it running and touched (so others, oldest touched first, are reached before it), its trail says
    ``compensation.waiting`` once, not once per pass, and no attempt is recorded while it waits."""
    from toolhub.models import AuditEvent
    from toolhub.sagas.recovery import sagas_sweep

    with registry.temporarily(reserve_fs_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        touched = []
        for _ in range(2):
            with django_capture_on_commit_callbacks(execute=True):
                sagas_sweep(limit=10)
            undo.refresh_from_db()
            touched.append(undo.updated_at)
    assert undo.status == CompensationStatus.RUNNING and str(inner.pk) in undo.last_error
    assert touched[0] < touched[1]
    assert AuditEvent.objects.filter(event_type="compensation.waiting", call_id=undo.step_call_id).count() == 1
    assert not undo.attempt_log.exists()
