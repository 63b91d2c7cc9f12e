"""Review fk (2026-12-06): saga rollbacks reopened, and what a rollback asked for in a request answers.

Seen by alice, a member of tenant acme with an API key. Each finding's test failed on the reviewed code (main at
3fc511b) and passes now; it states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. Eager rollback answers without rights re-read: ``POST /api/v1/sagas/{id}/rollback/`` and
   ``POST /api/v1/runs/{id}/rollback/`` ran the compensations in the request (eager tasks, the embedded default) and
   answered the saga (compensations' statuses, tools, calls) with the scope memoized before that wait; an asker
   removed from the tenant meanwhile was answered what reading it back refuses (404). Review eo had closed this for
   direct calls and the run views and left it noted. Fixed by one re-read for every view that ran work in its request,
   ``toolhub.rights_recheck.still_visible_after_running_here`` (the run views' ``_proceeded`` now use it too): a saga
   or run no longer visible answers 403, the rollback done all the same.
2. Ended run not woken for a held step's or a resolution's note: ``reopen_rollback`` clears ``told_at`` so the
   conversation is told again, but a reopen whose rollback finishes again at once (a resolution by hand, a held late
   step found by the sweep) settles no call of the run, and nothing else wakes a run that ended: its conversation kept
   "NOT rolled back ... an operator was alerted" for ever. Now ``reopen_rollback`` sends ``rollback_reopened`` after
   commit for a run's saga (``toolhub.signals``: no app import) and the agents app wakes the run, which tells the
   note at once (an ended run appends it in ``_begin_step``); a retry's wake-up finds the rollback under way and tells
   nothing until the retry's call settles and wakes it again.

Checked and holding:
- ``told_at`` cleared on each reopen: a retry or resolution racing the run's wake-up is told once it finishes again,
  never lost (``saga_rollback_notes`` locks the rollback rows: a reopen waits for a wake-up reading them and clears
  ``told_at`` after it; one committed first leaves the rollback unfinished, which the wake-up skips); each telling is
  the whole rollback as it stands now, so a repeated note is a new outcome, not a duplicate (read in code, and the
  resolution test counts exactly two notes).
- Two operators retrying or resolving one compensation under a finished rollback at once (PostgreSQL, both queued on
  the saga's row): one acts, the other is refused, one ``saga.rollback_reopened``, one more ``saga.rollback_finished``,
  chains verify (tested, four pairings).
- A retry racing the sagas sweep (``compensation_retry_due``, ``saga_sync_compensation``, ``_stalled_rollbacks``):
  every path locks the saga's row first and moves a compensation by guarded update from the status it read, so the
  second reads the first's result (read in code; the race test covers the lock order).
- Another tenant's operator posting acme's saga or compensation id (with acme's page's digest) to the Sagas and
  Compensations actions or the saga page's retry: nothing retried, resolved or reopened (tested).
- A rollback reopened after its tenant was deleted runs nothing there (review fa: the deleted tenant is refused first,
  an undoing principal included); after its step's user was deleted a retried compensation still runs, undoing being
  exempt from the user's standing only, as documented (read in code: ``_standing_refusal``). Runs cannot be deleted
  (``AgentRunAdmin`` is read-only, no API or service deletes one), so no rollback outlives its run.
- Audit chains verify after each reopen path tested here (``assert_audit_intact``).
"""

import datetime as dt
import json
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from rest_framework.test import APIClient

from tests.helpers import assert_audit_intact, console
from tests.mcp.conftest import token
from tests.sagas.sample_tools import RELEASE_FAILS
from tests.security_review.direct_sagas import direct_call
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.security_review.test_review_2026_12_06_da import BOOK_ONCE, _run_step_on_its_way, _sweep_at
from tests.tenancy.conftest import make_user
from toolhub import ToolContext, tool
from toolhub.admin_marks import MARKS_FIELD, seen_digest
from toolhub.exceptions import InvalidTransitionError
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga
from toolhub.sagas.recovery import compensation_mark, compensation_resolve, compensation_retry
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

#: What the compensation does while it runs (set by each test): the world changes during the request's wait.
WHILE_UNDOING: list[Any] = []

#: What a caller who left the tenant while the rollback they asked for ran in their request is told.
NO_LONGER_A_MEMBER_OF_SAGA = (
    "You are no longer a member of the tenant this saga belongs to; the rollback was done, its outcome is not shown."
)


@tool
def fk_lease(item: str, ctx: ToolContext) -> dict:
    """Lease an item of acme's."""
    return {"leaseId": f"L-{item}", "item": item}


@fk_lease.compensation(idempotent=True)
def fk_unlease(lease_id: str, ctx: ToolContext) -> dict:
    """Give a lease back (the world changes while it is given back)."""
    for change in WHILE_UNDOING:
        change()
    return {"returned": lease_id}


@pytest.fixture
def lease_tools() -> Any:
    WHILE_UNDOING.clear()
    with registry.temporarily(fk_lease, fk_unlease):
        yield
    WHILE_UNDOING.clear()


def _api_client(user: User) -> APIClient:
    """A REST client authenticated by ``user``'s API key: the user is read afresh on every request."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(user)}")
    return client


def _leave_while_undoing(user: User) -> None:
    WHILE_UNDOING.append(lambda: TenantMembership.objects.filter(user_id=user.pk).delete())


def test_a_direct_saga_rolled_back_in_the_request_whose_asker_left_meanwhile_answers_the_refusal(
    alice: User, lease_tools: None
) -> None:
    """Found: alice's ``POST /api/v1/sagas/{id}/rollback/`` ran the compensations in the request (eager, the embedded
    default); while one ran she was removed from acme; the answer was 202 with the saga (its compensations' statuses,
    tools, calls), read with the scope memoized before the wait, where ``GET /api/v1/sagas/{id}/`` answers 404.
    Expect: as a direct call or a run proceeded in the request, the rights are read again after the wait and a saga
    she may no longer see answers 403 with nothing of it; the rollback itself was done (kept for operators)."""
    client = _api_client(alice)
    assert client.post("/api/v1/sagas/", {"saga_id": "fk-d", "tenant": "acme"}, format="json").status_code == 201
    step = client.post(
        "/api/v1/calls/", {"tool": "fk_lease", "arguments": {"item": "van"}, "saga_id": "fk-d"}, format="json"
    )
    assert step.status_code in (200, 201), step.content
    _leave_while_undoing(alice)

    answer = client.post("/api/v1/sagas/fk-d/rollback/?tenant=acme", format="json")

    saga = Saga.objects.get(key="fk-d", tenant="acme")
    assert saga.compensations.get().status == CompensationStatus.SUCCEEDED  # it was undone all the same
    assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.COMPENSATED
    assert answer.status_code == 403, answer.content
    assert answer.json() == {"detail": NO_LONGER_A_MEMBER_OF_SAGA}
    assert client.get("/api/v1/sagas/fk-d/").status_code == 404


def test_a_run_rolled_back_in_the_request_whose_asker_left_meanwhile_answers_the_refusal(
    alice: User, lease_tools: None, make_agent: Any, start: Any
) -> None:
    """Found: the same for a run: alice's ``POST /api/v1/runs/{id}/rollback/`` compensated the run's step in the
    request; removed from acme while it ran, she was answered 202 with the run's saga, where reading the run back
    answers 404. Expect: the answer of the run views that proceeded a run in the request (403, nothing of it)."""
    script = [
        {"content": "", "tool_calls": [{"name": "fk_lease", "arguments": {"item": "van"}}]},
        {"content": "leased"},
    ]
    run = start(make_agent(tools=["fk_lease"], script=script), alice)
    step = ToolCall.objects.get(run_id=run.id, tool_name="fk_lease")
    assert step.status == CallStatus.SUCCEEDED
    client = _api_client(alice)
    _leave_while_undoing(alice)

    answer = client.post(f"/api/v1/runs/{run.id}/rollback/", format="json")

    step.refresh_from_db()
    assert step.status == CallStatus.COMPENSATED
    assert answer.status_code == 403, answer.content
    assert "no longer a member" in answer.json()["detail"] and "fk_unlease" not in answer.content.decode()
    assert client.get(f"/api/v1/runs/{run.id}/").status_code == 404


def test_a_rollback_asked_by_a_member_who_stays_answers_the_saga(alice: User, lease_tools: None) -> None:
    """Holding: the re-read refuses only a reader the wait outlived: alice, still in acme, is answered 202 with the
    saga rolled back (one re-read, nothing else changed)."""
    client = _api_client(alice)
    assert client.post("/api/v1/sagas/", {"saga_id": "fk-s"}, format="json").status_code == 201
    client.post("/api/v1/calls/", {"tool": "fk_lease", "arguments": {"item": "bus"}, "saga_id": "fk-s"}, format="json")

    answer = client.post("/api/v1/sagas/fk-s/rollback/", format="json")

    assert answer.status_code == 202, answer.content
    assert answer.json()["status"] == "compensated"
    assert [c["status"] for c in answer.json()["compensations"]] == ["succeeded"]


# --- operators racing on a compensation under a finished rollback (PostgreSQL: real row locks) ---------------------


def _failed_under_a_finished_rollback(alice: User, settings: Any, key: str) -> tuple[Saga, Compensation]:
    """alice's direct saga ``key``: one step whose compensation failed (one attempt), its rollback finished."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    direct_call("reserve", {"item": "seat"}, saga=key, user=alice)
    RELEASE_FAILS["on"] = True
    direct_call("explode", {"reason": "boom"}, saga=key, user=alice)
    RELEASE_FAILS["on"] = False
    saga = Saga.objects.get(key=key, tenant="acme")
    compensation = saga.compensations.get()
    assert compensation.status == CompensationStatus.FAILED
    assert saga.rollbacks.get().finished_at is not None
    return saga, compensation


def _rollback_events(event_type: str, rollback_id: int) -> list[dict[str, Any]]:
    return [
        data
        for data in (json.loads(e.data) for e in AuditEvent.objects.filter(event_type=event_type).order_by("seq"))
        if data.get("rollback") == rollback_id
    ]


def _second_acme_operator(roles: dict[str, Group], tenant: Tenant) -> User:
    return make_user("acme-operator-2", tenant=tenant, staff=True, groups=(roles["operators"],))


def _race(*actions: Any, saga: Saga) -> list[Any]:
    """Run ``actions`` on threads of their own while another session holds the saga's row; let them go together."""
    locker = psycopg.connect(**dsn())
    locker.execute("SELECT id FROM sagas_saga WHERE id = %s FOR UPDATE", [saga.pk])
    try:
        started = [in_thread(action) for action in actions]
        wait_for_lock_waiter("sagas_saga", count=len(actions))
    finally:
        locker.rollback()
        locker.close()
    results = []
    for thread, result in started:
        thread.join(30)
        results.extend(result)
    return results


@pytest.mark.postgres
@pytest.mark.usefixtures("saga_tools")
@pytest.mark.parametrize("first", ["retry", "resolve"])
@pytest.mark.parametrize("second", ["retry", "resolve"])
def test_two_operators_acting_on_one_compensation_at_once_reopen_its_rollback_once(
    first: str, second: str, alice: User, acme_operator: User, roles: dict[str, Group], tenant: Tenant, settings: Any
) -> None:
    """Holding (PostgreSQL): two operators retry or resolve by hand the same failed compensation under a finished
    rollback at the same moment (their transactions queued on the saga's row). One acts; the other is refused
    (``InvalidTransitionError``: it reads the compensation as the first left it); the rollback is reopened once and
    finished once more, naming the winner's outcome; the audit chains verify."""
    saga, compensation = _failed_under_a_finished_rollback(alice, settings, f"fk-race-{first}-{second}")
    rollback = saga.rollbacks.get()
    other = _second_acme_operator(roles, tenant)

    def act(kind: str, who: User) -> Any:
        def action() -> Any:
            actor = f"user:{who.username}"
            if kind == "retry":
                return compensation_retry(compensation=compensation, actor=actor, by=who)
            return compensation_resolve(compensation=compensation, actor=actor, note="done by hand", by=who)

        return action

    results = _race(act(first, acme_operator), act(second, other), saga=saga)

    refused = [r for r in results if isinstance(r, InvalidTransitionError)]
    done = [r for r in results if isinstance(r, Compensation)]
    assert len(refused) == 1 and len(done) == 1, results
    compensation.refresh_from_db()
    assert compensation.status in (CompensationStatus.SUCCEEDED, CompensationStatus.RESOLVED)
    assert len(_rollback_events("saga.rollback_reopened", rollback.pk)) == 1
    finished = _rollback_events("saga.rollback_finished", rollback.pk)
    assert [f["compensations"]["1"] for f in finished] == ["failed", compensation.status], finished
    rollback.refresh_from_db()
    assert rollback.finished_at is not None and rollback.told_at is None
    assert_audit_intact()


@pytest.mark.usefixtures("saga_tools")
@pytest.mark.parametrize(
    "changelist, action, selected",
    [
        ("/admin/sagas/saga/", "retry_selected", "saga"),
        ("/admin/sagas/saga/", "resolve_selected", "saga"),
        ("/admin/sagas/compensation/", "retry_selected", "compensation"),
        ("/admin/sagas/compensation/", "resolve_selected", "compensation"),
        ("/admin/sagas/saga/{saga}/retry/", "", "saga"),
    ],
)
def test_another_tenants_operator_cannot_reopen_a_finished_rollback_by_crafted_ids(
    changelist: str, action: str, selected: str, alice: User, globex_operator: User, settings: Any
) -> None:
    """Holding: globex's operator posts acme's saga or compensation id (a failed compensation under a finished
    rollback) to the Sagas and Compensations actions and the saga page's retry, with the very digest acme's page
    would carry: the actions act on the tenant-scoped rows only, so nothing is retried or resolved, no
    ``saga.rollback_reopened`` is written and the rollback stays finished."""
    saga, compensation = _failed_under_a_finished_rollback(alice, settings, "fk-x")
    rollback = saga.rollbacks.get()
    pk = saga.pk if selected == "saga" else compensation.pk
    form = {
        "action": action,
        "_selected_action": [str(pk)],
        "apply": "1",
        "note": "done by hand",
        MARKS_FIELD: seen_digest([compensation_mark(compensation)]),
    }

    answer = console(globex_operator).post(changelist.format(saga=saga.pk), form)

    assert answer.status_code in (200, 302), answer.status_code
    compensation.refresh_from_db()
    rollback.refresh_from_db()
    assert compensation.status == CompensationStatus.FAILED
    assert rollback.finished_at is not None
    assert not AuditEvent.objects.filter(event_type="saga.rollback_reopened").exists()
    assert not AuditEvent.objects.filter(event_type="compensation.retry_requested").exists()


# --- a rollback finished again with no call settling: the run's conversation ---------------------------------------

RESERVE_ONCE = [
    {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
    {"content": "reserved"},
]


def _notes(run: Any) -> list[str]:
    run.refresh_from_db()
    return [m["content"] for m in run.messages if m["role"] == "system"]


@pytest.mark.usefixtures("saga_tools")
def test_a_resolution_by_hand_under_a_finished_rollback_is_told_to_an_ended_runs_conversation(
    alice: User, acme_operator: User, make_agent: Any, start: Any, settings: Any
) -> None:
    """Found: alice's run ended; its rollback's compensation failed and the conversation was told "NOT rolled back ...
    an operator was alerted". An operator resolved it by hand: the rollback was reopened and finished again naming the
    step ``resolved`` (``told_at`` cleared for it), but nothing woke the run, which had ended: no wake-up ever came, so
    its conversation said "NOT rolled back" for ever. Expect: a reopen wakes the rollback's run after commit (as a
    compensation's settled call does), so the rollback finished again is told at once: a second note, "resolved by an
    operator"."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    run = start(make_agent(tools=["reserve"], script=RESERVE_ONCE), alice)
    RELEASE_FAILS["on"] = True
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    RELEASE_FAILS["on"] = False
    failed = Saga.objects.get(run_id=run.id).compensations.get()
    assert failed.status == CompensationStatus.FAILED
    assert len(_notes(run)) == 1 and "NOT rolled back" in _notes(run)[0]

    compensation_resolve(
        compensation=failed, actor=f"user:{acme_operator.username}", note="released by phone", by=acme_operator
    )

    notes = _notes(run)
    assert len(notes) == 2, notes
    assert "resolved by an operator (released by phone)" in notes[1], notes[1]
    rollback = Saga.objects.get(run_id=run.id).rollbacks.get()
    assert rollback.finished_at is not None and rollback.told_at is not None
    assert_audit_intact()


@pytest.mark.usefixtures("saga_tools")
def test_a_held_late_step_the_sweep_finds_after_the_run_ended_is_told_to_its_conversation(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Found (review ex's "found, not fixed"): a step of an ended run, still running when the run was rolled back,
    whose worker died unheard, was filed held by the sweep under the finished rollback, which it reopened and finished
    again naming it ``held``; but the sweep wakes only running and waiting runs, so the ended run's conversation was
    never told an operator decides. Expect: the reopen wakes the run; a second note says its outcome is unknown."""
    run = start(make_agent(tools=["book"], script=BOOK_ONCE), alice)
    slow = _run_step_on_its_way(run.id, alice, "slow")
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    assert len(_notes(run)) == 1
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.NEEDS_ATTENTION, finished_at=timezone.now())

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1

    notes = _notes(run)
    assert len(notes) == 2, notes
    assert 'book({"item":"slow"}): its own outcome is unknown; an operator decides' in notes[1], notes[1]
    assert Saga.objects.get(run_id=run.id).rollbacks.get().told_at is not None
    assert_audit_intact()
