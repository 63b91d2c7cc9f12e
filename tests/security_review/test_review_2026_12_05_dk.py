"""Review dk (2026-12-05): toolhub's time-driven machinery (sweepers, beat tasks, expiries, leases, claims, retries).

Findings (each test fails on the reviewed code, main at 7e78cac, and passes after the fix):

1. The sagas' sweep looked for a direct saga's failed step whose notification was lost
   (``recovery._roll_back_unheard_failures``) among the 200 newest direct sagas holding any completed step,
   whether or not one of them had a failure. A direct saga whose steps all succeeded stays ``open`` with its steps
   ``recorded`` for ever, so once a deployment had 200 of them newer than a saga with an unheard failure, that
   failure was never rolled back (and every 5 s tick read up to 400 rows for nothing). Fixed: the sweep selects,
   in SQL, only the direct sagas that have such an unheard failure, so its limit counts sagas to act on.
2. The expiry of calls awaiting an outside result (``sweeper.calls_expire_awaiting_results``) moved each call it
   had read as overdue guarded by its status alone: a call answered and asked again between the read and the move
   (an external compensation's next attempt: the same call, ``awaiting_result`` again, attempt + 1, waiting from
   now) was expired at once, its fresh wait cut short. Fixed: ``waiting.tool_call_expire_awaiting`` moves the call
   only in the attempt it read (``call_transition(attempt=)``).
3. The redispatch of queued calls whose message was lost (``sweeper.calls_redispatch_stale``) read its batch with
   the id alone and then loaded each call's claim hint (tool, tenant, run, attempt) one deferred query at a time:
   four extra round trips per call, 2,000 per sweep at the batch's bound, just when the broker is failing. Fixed:
   the batch reads the hint's columns, oldest first; a call claimed between the read and its write is not sent.

Checked and found holding (no test here): every sweep acts on each row in that row's own tenant (the call's, the
request's, the saga's: ``audit_call_event`` and ``audit_saga`` chain by the row, e-mails go to
``approvers_still_counting`` of the request's tenant, webhooks per delivery); sweep actors are system names
(``reconciler``, ``expiry``, ``escalation``, ``saga-sweeper``), never a user's (operators are ``operator:<name>``);
expiry against a decision: both lock the request, the loser is told "expired; nothing was changed" and the trail
has one outcome (as earlier reviews found); the reconciler's move is guarded by status, attempt and the lease it read as
ended, so a live claim is never taken and a non-idempotent call is never run twice (a late outcome of a lost
attempt is refused); two beat processes at once: every move is a guarded UPDATE or under the row's lock, so
the second finds nothing to do (redispatch may send a duplicate message, whose claim misses); every sweep's batch
is bounded (500, 200); datetimes are aware (``USE_TZ``, ``timezone.now()``; the one ``datetime.now(UTC)`` is aware);
the step token drops a model answer whose step lost the run.
"""

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.security_review.direct_sagas import direct_call, unheard_call
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("saga_tools")
def test_an_unheard_failure_is_rolled_back_however_many_newer_sagas_just_succeeded(alice: User) -> None:
    """Found: the sweep looked for unheard failures among the newest ``limit`` (200) direct sagas with a completed
    step, which includes every saga that simply succeeded (they stay open for ever): an older saga's lost failure
    was never rolled back once that many newer sagas existed (here ``limit=2`` and two newer sagas).
    Expect: the sweep's limit counts only sagas with an unheard failure; the old saga is rolled back, once.
    """
    direct_call("book", {"item": "a"}, saga="deaf", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    assert failed.status == CallStatus.FAILED
    for key in ("later-1", "later-2"):
        assert direct_call("book", {"item": key}, saga=key, user=alice).status == CallStatus.SUCCEEDED
    assert Saga.objects.get(key="deaf").status == SagaStatus.OPEN

    assert sagas_sweep(limit=2)["rolled_back"] == 1

    saga = Saga.objects.get(key="deaf")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.get().failed_call_id == failed.id
    assert sagas_sweep(limit=2)["rolled_back"] == 0
    assert {s.key: s.status for s in Saga.objects.exclude(key="deaf")} == {
        "later-1": SagaStatus.OPEN,
        "later-2": SagaStatus.OPEN,
    }


@pytest.mark.django_db
def test_the_expiry_sweep_does_not_expire_a_wait_that_began_after_it_read_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: ``calls_expire_awaiting_results`` reads the calls past their deadline, then moves each one guarded
    only by its status: a call answered meanwhile and asked again (an external compensation's next attempt puts
    the same call back to ``awaiting_result``, attempt + 1, its wait counted from now) was expired at once by the
    stale read, its new wait cut short and the compensation failed without the outside system being asked.
    Expect: the sweep's move holds only for the attempt it read as overdue; the new wait stands, no event written.
    """
    from toolhub import sweeper, waiting

    long_ago = timezone.now() - timedelta(days=2)
    call = ToolCall.objects.create(
        tool_name="record_effect",
        status=CallStatus.AWAITING_RESULT,
        tenant="acme",
        kind=CallKind.COMPENSATION,
        attempts=1,
        queued_at=long_ago,
    )
    expire = waiting.tool_call_expire_awaiting

    def asked_again_meanwhile(stale: ToolCall, *, now: datetime) -> bool:
        # Between the sweep's read and its move: answered (an error), then asked again as a new attempt.
        ToolCall.objects.filter(pk=stale.pk).update(attempts=2, queued_at=timezone.now())
        return expire(stale, now=now)

    monkeypatch.setattr(sweeper, "tool_call_expire_awaiting", asked_again_meanwhile)
    events = AuditEvent.objects.count()

    assert sweeper.calls_expire_awaiting_results() == 0

    row = ToolCall.objects.get(pk=call.pk)
    assert (row.status, row.attempts) == (CallStatus.AWAITING_RESULT, 2), (row.status, row.error)
    assert AuditEvent.objects.count() == events


@pytest.mark.django_db
def test_the_redispatch_sweep_reads_its_batch_once_not_four_times_per_call() -> None:
    """Found: ``calls_redispatch_stale`` read its batch with the id alone, then the message's claim hint
    (``ClaimHint.of``) loaded tool, tenant, run and attempt of each call one deferred query at a time: four extra
    round trips per call, up to 2,000 per sweep when the broker lost its messages (when the system is in trouble).
    Expect: one read of the batch; per call only its guarded write (and the savepoint around it).
    """
    from toolhub.sweeper import calls_redispatch_stale

    for _ in range(5):
        ToolCall.objects.create(
            tool_name="record_effect",
            status=CallStatus.QUEUED,
            tenant="acme",
            queued_at=timezone.now() - timedelta(hours=1),
        )
    with CaptureQueriesContext(connection) as queries:
        assert calls_redispatch_stale() == 5
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1, reads
    assert ToolCall.objects.filter(queued_at__lt=timezone.now() - timedelta(minutes=1)).count() == 0
