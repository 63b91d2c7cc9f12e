"""Review 2026-12-07 (v): saga retry/resolve and run cancel on mixed selections; calls settled across threads.

Review o (tests/security_review/test_review_2026_12_07_o.py) posted every admin action on mixed selections, but
globex's sagas needed no attention, so retry and resolve acted on nothing; review c
(tests/security_review/test_review_2026_12_07_c.py) left a lost wake to the runs sweep. This review (main at 66111ef)
posted the sagas' retry/resolve and the runs' cancel on selections mixing the operator's own tenant's rows (one
needing the action, one where it makes no sense) with another tenant's, and raced a step's settle against a
rollback of its saga on PostgreSQL.

Findings: none. Every probe below held on the code as found (no fix, no migration).

Checked and holding:

- Saga and compensation lists, "Retry" and "Resolve by hand", posted by globex's operator as a browser does (first
  post, then the confirmation page's own form) on globex's saga needing attention (its step held), globex's saga
  needing none (its step only recorded) and acme's saga needing attention (or their compensations): the answer
  (status, redirect, page, messages) is exactly that of the same selection with a missing id in acme's place, from
  the same state (a savepoint rolled back); globex's held compensation ends the same both ways, retried (its undo
  run, ``succeeded``) or resolved, the recorded one keeps every column; every audit event appended is globex's, and
  the one ``compensation.retry_requested`` / ``compensation.resolved`` names the held step only; no column of acme's
  sagas, compensations, calls, runs or approval requests changes
  (``test_saga_retry_and_resolve_on_a_mixed_selection_act_on_the_own_rows_needing_attention_only``).
  ``CommentActionMixin.response_action`` reads the ticked rows from ``get_queryset`` (tenant-scoped) and the
  services lock and act on that scope only (``compensations_retry``/``compensations_resolve`` through
  ``_hold_as_seen``). Checked to bite: with ``response_action`` reading ``_default_manager``
  instead of ``get_queryset``, these five tests fail.
- Runs list, "Cancel selected runs", on globex's waiting run, globex's completed run and acme's waiting run: the
  same answer as with a missing id; globex's waiting run cancelled and its approval request withdrawn, its completed
  run untouched, one ``run.cancelled`` event (that run's), all events globex's; acme's run, call and request keep
  every column (``test_run_cancel_on_a_mixed_selection_cancels_the_own_going_run_only``).
- A step settling in another thread while a rollback of its saga is being written (PostgreSQL, forced: the
  rollback's transaction is open when the worker settles, which waits on its locks): the rollback read the steps
  before the step succeeded, so the step is filed late under it (``plan_compensation``'s ``late_for``, opened again
  if it had finished), undone, and the rollback finishes again; both steps compensated once, saga ``compensated``,
  nothing left for the sagas sweep
  (``test_a_step_settling_in_another_thread_while_a_rollback_reads_its_saga_is_undone_by_it``).
- Settling together (``toolhub.calls.settling_together``) across threads, read, not raced: the block's notices and
  its ``finish`` are after-commit actions of the connection that settled the calls (one thread), the block and the
  follow-ups live in context variables (never shared between threads); another thread's settle of the same run
  wakes it at its own commit. ``run_advance`` takes the run's row lock blocking (no skip), and reads the turn's
  calls after it: of two wakes racing (the block's one and a worker's), the later sees both commits. A run that
  compensates on error reads the rollback under ``saga_rollback``'s saga lock; the compensation call's notice runs
  the sagas' receiver (which closes the rollback, committed) before the agents' one (which wakes the run: apps
  order, and in a block the wake waits for ``finish``), so the wake follows the close; a compensation that
  succeeded also moves its step to ``compensated`` in the closing transaction, whose notice wakes the run after
  that commit, whatever the receivers' order. Raced on PostgreSQL: the run's step reads the rollback under way
  holding the saga's lock while the compensation's due retry waits for it, then runs, closes the rollback and wakes
  the run, which completes, its model told, without a sweep
  (``test_a_compensation_settling_while_its_run_reads_the_rollback_under_way_wakes_the_run_after``; it still passes
  with the two receivers swapped, through the step's own notice). The calls that
  settle inside a saga's own transaction (``withdraw_held_inner``'s block) are told after its commit, in a block of
  their own (or the enclosing unfinished one), the run woken once. Compensations and calls made on their behalf
  are never withdrawn by a run's or the calls admin's cancel (``tool_call_cancel`` refuses ``is_undoing``), so no
  cancel leaves a compensation ``running`` on a call that will never settle.
- What is delayed to a sweep, not stuck: a sagas receiver that failed (logged) leaves the compensation ``running``
  on a settled call until the sagas sweep syncs it; that sync closes the rollback without waking the run, and the
  runs sweep (``runs_to_wake``), which skips a run only while its rollback is under way, wakes it at its next tick.
  Process death between commit and wake is the same (review c).
"""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max, Model
from django.utils import timezone

from agents_app.loop import Advance, run_advance
from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.sagas.sample_tools import LOG, RELEASE_FAILS
from tests.security_review.direct_sagas import (  # noqa: F401 - saga_tools: a fixture, registered by being imported
    direct_call,
    saga_tools,
    settling_unheard,
)
from tests.security_review.pg_races import in_thread, wait_for_lock_waiter
from tests.security_review.test_review_2026_12_07_o import _act, _rows, _swapped
from tests.tenancy.conftest import ORDER_SCRIPT, _run, make_user
from tests.tenancy.test_admin_sweep import _missing
from toolhub import ToolContext
from toolhub.authorization import CallPrincipal
from toolhub.calls import call_transition
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.models import Compensation, CompensationStatus, RollbackTrigger, Saga, SagaStatus
from toolhub.sagas.recovery import compensation_retry_due, sagas_sweep
from toolhub.sagas.services import saga_rollback, saga_rollback_on_demand

pytestmark = pytest.mark.django_db

SAGAS = "/admin/sagas/saga/"
COMPENSATIONS = "/admin/sagas/compensation/"
RUNS = "/admin/agents_app/agentrun/"


def _reserve(tenant: str, user: User, key: str) -> None:
    """``user``'s direct ``reserve`` in saga ``key`` of ``tenant`` (run once the commit's callbacks run)."""
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant=tenant)
    tool_call_request(
        request=CallRequest(
            tool_name="reserve",
            arguments={"item": key},
            principal=principal,
            context=ToolContext(tenant=tenant),
            saga_id=key,
        )
    )


def _reserved(tenant: str, key: str) -> Saga:
    """The saga ``_reserve`` made: one recorded step."""
    call = ToolCall.objects.get(tenant=tenant, saga_id=key)
    assert call.status == CallStatus.SUCCEEDED, call.error
    saga = Saga.objects.get(key=key, tenant=tenant)
    assert saga.compensations.get().status == CompensationStatus.RECORDED
    return saga


def _held(saga: Saga) -> Saga:
    """``saga`` rolled back with its step held for an operator: it needs attention (retry or resolve)."""
    saga_rollback(saga_key=saga.key, tenant=saga.tenant, actor="test", trigger=RollbackTrigger.ON_DEMAND, hold=True)
    saga.refresh_from_db()
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert saga.compensations.get().status == CompensationStatus.HELD
    return saga


def _state_of(tenant: str) -> dict[str, list[dict[str, Any]]]:
    """Every column of ``tenant``'s sagas, compensations, calls, runs and approval requests."""
    models: list[tuple[type[Model], str]] = [
        (Saga, "tenant"),
        (Compensation, "saga__tenant"),
        (ToolCall, "tenant"),
        (AgentRun, "tenant"),
        (ApprovalRequest, "tenant"),
    ]
    return {
        model._meta.label: list(model._default_manager.filter(**{field: tenant}).order_by("pk").values())
        for model, field in models
    }


def _events_after(seq: int) -> list[tuple[str, str, str]]:
    """The audit events appended after ``seq``: (tenant, type, call or run)."""
    rows = AuditEvent.objects.filter(pk__gt=seq).order_by("pk")
    return [(e.tenant, e.event_type, str(e.call_id or e.run_id or "")) for e in rows]


def _last_seq() -> int:
    return AuditEvent.objects.aggregate(last=Max("pk"))["last"] or 0


@pytest.fixture
def globex_operator(other_tenant: Tenant) -> User:
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    call_command("toolhub_roles", verbosity=0)
    return make_user("globex-operator", tenant=other_tenant, staff=True, groups=(Group.objects.get(name="operators"),))


@pytest.fixture
def two_tenants(
    saga_tools: None,  # noqa: F811 - the fixture imported above
    tenant: Tenant,
    other_tenant: Tenant,
    alice: User,
    django_capture_on_commit_callbacks: Any,
) -> dict[str, Any]:
    """globex: a saga needing attention and one that does not; acme: a saga needing attention (the other tenant's)."""
    gina = make_user("gina", tenant=other_tenant)
    with django_capture_on_commit_callbacks(execute=True):
        _reserve("globex", gina, "g-held")
        _reserve("globex", gina, "g-recorded")
        _reserve("acme", alice, "a-held")
    own_held, own_recorded, theirs = (
        _reserved("globex", "g-held"),
        _reserved("globex", "g-recorded"),
        _reserved("acme", "a-held"),
    )
    with django_capture_on_commit_callbacks(execute=True):
        _held(own_held)
        _held(theirs)
    return {"gina": gina, "own_held": own_held, "own_recorded": own_recorded, "theirs": theirs}


def _made(model: type[Model], pks: list[str]) -> list[dict[str, Any]]:
    """What an action made of the rows (``_rows``), but the id of a call it made (a new one each time)."""
    return [{k: v for k, v in row.items() if k != "call_id"} for row in _rows(model, pks)]


def _compare(
    who: User, changelist: str, action: str, model: type[Model], own: list[str], theirs: list[str], capture: Any
) -> tuple[list[tuple[str, str, str]], list[dict[str, Any]]]:
    """The action on ``own`` + ``theirs`` answers as on ``own`` + as many missing ids, from the same state.

    Returns the audit events the mixed selection appended and what became of the own rows.
    """
    missing = [_missing(model) for _ in theirs]  # distinct: an integer key's is one number, counted on
    missing = [str(int(pk) + i) if pk.isdigit() else pk for i, pk in enumerate(missing)]
    with transaction.atomic():  # the same state as the mixed selection below, then undone
        with capture(execute=True):
            absent = [
                _swapped(drawn, list(zip(missing, theirs, strict=True)))
                for drawn in _act(who, changelist, action, own + missing)
            ]
        own_absent = _made(model, own)
        transaction.set_rollback(True)
    before = _last_seq()
    with capture(execute=True):
        mixed = _act(who, changelist, action, own + theirs)
    assert mixed == absent
    assert _made(model, own) == own_absent
    return _events_after(before), own_absent


@pytest.mark.parametrize(
    ("changelist", "action", "model"),
    [
        (SAGAS, "retry_selected", Saga),
        (SAGAS, "resolve_selected", Saga),
        (COMPENSATIONS, "retry_selected", Compensation),
        (COMPENSATIONS, "resolve_selected", Compensation),
    ],
)
def test_saga_retry_and_resolve_on_a_mixed_selection_act_on_the_own_rows_needing_attention_only(
    changelist: str,
    action: str,
    model: type[Model],
    two_tenants: dict[str, Any],
    globex_operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: (held) review o's mixed selections held only sagas needing no attention: retry and resolve did nothing.
    Expect: globex's operator ticking globex's saga needing attention, globex's saga needing none and acme's saga
    needing attention (or their compensations) gets exactly the answer of the same selection with a missing id in
    acme's place; globex's held compensation is retried (running, its undo called) or resolved, the other left as it
    was; every audit event appended is globex's, one retry or resolution event for the held compensation only; no
    column of acme's sagas, compensations, calls, runs or requests changes.
    """
    own_held, own_recorded, theirs = two_tenants["own_held"], two_tenants["own_recorded"], two_tenants["theirs"]
    if model is Saga:
        own, foreign = [str(own_held.pk), str(own_recorded.pk)], [str(theirs.pk)]
    else:
        own = [str(own_held.compensations.get().pk), str(own_recorded.compensations.get().pk)]
        foreign = [str(theirs.compensations.get().pk)]
    acme_before = _state_of("acme")
    recorded_before = list(Compensation.objects.filter(saga=own_recorded).values())

    events, _ = _compare(globex_operator, changelist, action, model, own, foreign, django_capture_on_commit_callbacks)

    assert _state_of("acme") == acme_before
    assert list(Compensation.objects.filter(saga=own_recorded).values()) == recorded_before
    held = own_held.compensations.get()
    assert held.status == (CompensationStatus.SUCCEEDED if action == "retry_selected" else CompensationStatus.RESOLVED)
    assert {tenant for tenant, _, _ in events} == {"globex"}
    decided = "compensation.retry_requested" if action == "retry_selected" else "compensation.resolved"
    step = str(held.step_call_id)
    assert [(kind, target) for _, kind, target in events if kind == decided] == [(decided, step)]
    assert not [e for e in events if e[2] == str(own_recorded.compensations.get().step_call_id)]


def test_run_cancel_on_a_mixed_selection_cancels_the_own_going_run_only(
    tenant: Tenant,
    other_tenant: Tenant,
    alice: User,
    globex_operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: (held) no test cancelled runs from a selection mixing the operator's tenant's runs with another's.
    Expect: globex's operator ticking globex's waiting run, globex's completed run and acme's waiting run gets the
    answer of the same selection with a missing id in acme's place; globex's waiting run is cancelled (its request
    withdrawn), its completed run left as it was, one ``run.cancelled`` event, for that run only, every event
    globex's; acme's run, its call and request keep every column.
    """
    gina = make_user("gina", tenant=other_tenant)
    order: list[dict[str, Any]] = [dict(step) for step in ORDER_SCRIPT]  # type: ignore[call-overload]
    with django_capture_on_commit_callbacks(execute=True):
        waiting = _run(gina, "globex-orders", ["create_order"], order)
        ended = _run(gina, "globex-ended", ["create_order"], [{"content": "nothing to do"}])
        theirs = _run(alice, "acme-orders", ["create_order"], order)
    for run in (waiting, ended, theirs):
        run.refresh_from_db()
    assert waiting.status == theirs.status == RunStatus.WAITING and ended.status == RunStatus.COMPLETED
    assert waiting.tenant == "globex" and theirs.tenant == "acme"
    acme_before = _state_of("acme")
    ended_before = _rows(AgentRun, [str(ended.pk)])

    events, _ = _compare(
        globex_operator,
        RUNS,
        "cancel_selected",
        AgentRun,
        [str(waiting.pk), str(ended.pk)],
        [str(theirs.pk)],
        django_capture_on_commit_callbacks,
    )

    assert _state_of("acme") == acme_before
    assert _rows(AgentRun, [str(ended.pk)]) == ended_before
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.CANCELLED
    assert ApprovalRequest.objects.get(call__run_id=waiting.id).status == ApprovalStatus.CANCELLED
    assert {tenant for tenant, _, _ in events} == {"globex"}
    assert [(kind, target) for _, kind, target in events if kind == "run.cancelled"] == [
        ("run.cancelled", str(waiting.pk))
    ]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_step_settling_in_another_thread_while_a_rollback_reads_its_saga_is_undone_by_it(alice: User) -> None:
    """Found: (held) a direct saga's step whose worker settles it while a rollback of the saga is being written (the
    rollback read the saga's steps before the step's commit: ``record_missing_steps`` missed it) was never raced.
    Expect: the step's settle waits for the rollback's transaction (its locks), then is filed late under that
    rollback (``plan_compensation``: opened again when it had finished), undone, and the rollback finishes again:
    both steps compensated once each, the saga ``compensated``, no rollback left open, nothing for a sweep to do.
    """
    direct_call("reserve", {"item": "first"}, saga="race", user=alice)
    with settling_unheard():
        late = direct_call("reserve", {"item": "second"}, saga="race", user=alice)
    # Its worker is still running it (its settle below is the worker's): nothing of it is recorded yet.
    ToolCall.objects.filter(pk=late.pk).update(status=CallStatus.RUNNING, finished_at=None, result=None)
    late.refresh_from_db()
    assert Saga.objects.get(key="race").compensations.count() == 1

    def settle() -> bool:
        return call_transition(
            late,
            to=CallStatus.SUCCEEDED,
            allowed_from={CallStatus.RUNNING},
            actor="worker:w1",
            result={"ok": True},
            finished_at=timezone.now(),
        )

    with transaction.atomic():
        saga_rollback_on_demand(saga_key="race", tenant="acme", actor="user:alice")
        worker, moved = in_thread(settle, name="worker")
        wait_for_lock_waiter("", 15)  # the worker's settle waits on a lock the rollback holds
    worker.join(30)
    assert moved == [True]

    saga = Saga.objects.get(key="race")
    assert saga.status == SagaStatus.COMPENSATED
    assert sorted(saga.compensations.values_list("status", flat=True)) == [CompensationStatus.SUCCEEDED] * 2
    assert not saga.rollbacks.filter(finished_at__isnull=True).exists()
    assert sorted(item for name, item in LOG if name == "release") == ["first", "second"]
    assert sagas_sweep() == dict.fromkeys(sagas_sweep(), 0)


ROLLED_BACK = [
    {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
    {"content": "", "tool_calls": [{"name": "explode", "arguments": {"reason": "card declined"}}]},
    {"content": "Sorry: {last_tool_result}"},
]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_compensation_settling_while_its_run_reads_the_rollback_under_way_wakes_the_run_after(alice: User) -> None:
    """Found: (held) a run whose agent compensates on error reads its rollback under way and goes idle while, in
    another thread, the compensation's due retry (the sagas sweep's) runs and finishes the rollback: never raced.
    Expect: the retry waits for the run's step (the saga's lock it holds), then undoes the step and closes the
    rollback before its call's notice wakes the run (sagas' receiver first), so the run, woken once it is done,
    finishes with its model told: completed, the saga compensated, the rollback told, without a sweep.
    """
    RELEASE_FAILS["on"] = True
    agent = agent_create(
        name="seat", provider="scripted", script=ROLLED_BACK, tools=["reserve", "explode"], compensate_on_error=True
    )
    run = run_start(agent=agent, user=alice, input="reserve my seat")
    run.refresh_from_db()
    saga = Saga.objects.get(key=str(run.id))
    compensation = saga.compensations.get()
    assert run.status in {RunStatus.RUNNING, RunStatus.WAITING}
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED
    RELEASE_FAILS["on"] = False
    Compensation.objects.filter(pk=compensation.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))

    with transaction.atomic():
        assert run_advance(run_id=run.id) == Advance.IDLE  # its rollback is under way: nothing to step
        sweeper, retried = in_thread(lambda: compensation_retry_due(compensation_id=compensation.pk))
        wait_for_lock_waiter("sagas_saga", 15)  # the retry waits for the saga the run's step holds
    sweeper.join(30)
    assert retried == [True]

    run.refresh_from_db()
    saga.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "Sorry: exploded: card declined"
    assert saga.status == SagaStatus.COMPENSATED
    assert saga.rollbacks.get().told_at is not None
    assert [item for name, item in LOG if name == "release"] == ["seat"]
