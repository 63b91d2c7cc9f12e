"""Review cg (2026-12-06): sagas left unseen by the sweep (reviews bv, ce's fixed held window) and by the dashboard.

Each finding's test failed on the reviewed code (main at 3b32380) and passes now.

Findings:

1. The sweep held an unheard failed direct step only when found one to two ``SAGA_UNHEARD_FAILURE_HOURS`` old: a
   sweep stopped longer than that (30 days) came back and never read, held or showed the failures of the outage.
   Fixed: a stored mark (``SweepMark`` ``unheard_failures``, sagas 0009) of where the last completed held scan
   reached; the next reads every failure from there to ``now - W``, oldest first, ``limit`` a tick, carrying on.
2. A failure from before the repair existed (older than two windows at the upgrade) was never read either. Decided:
   no mark is a first run (the migration writes none): every older unhandled failure is held once, a batch of
   ``limit`` read a tick, the mark set when the scan gets through; handled ones (a rollback names them, or the
   caller carried on) are read once and left.
3. The admin dashboard counted calls and approvals only: sagas needing an operator (held steps of a late failure,
   failed or unknown compensations) showed nowhere an operator looks first. Fixed: the sagas app registers a
   figure (``toolhub.sagas.dashboard``), scoped as the sagas list is and linked to its "needs attention" filter;
   figures may carry a link (``toolhub.dashboard.Figure``).

Checked and holds:
- The automatic window is as it was (``[now - W, now]``, review ce's boundary test); the held scan's range is
  ``[mark, now - W)``, so a failure exactly ``W`` old is rolled back once, never held too.
- Cost: the held scan reads through ``toolcall_failed_direct_step`` at most ``limit`` failures (index only, no
  subquery), then the subqueries run for that batch alone; in the steady state the range is one tick's worth (the
  fixed second window read every handled failure of a whole window each tick). Reviews bd, bn, d's plan tests pass.
- Two sweepers at once: the mark moves by a conditional ``UPDATE ... WHERE reached = <read>`` (the first creates it
  with ``get_or_create``); a failure both read is rolled back once (``saga_rollback`` locks, one per failure).
- The dashboard figure: one ``COUNT`` a page whatever the number of sagas (query-count test); another tenant's saga
  needing attention is not counted; staff who may not view sagas get no figure.

Left: a failure older than ``W`` passed by the scan because a step asked for after it was on its way, which later
ends without failing (cancelled, denied), is not read again (the fixed window re-read it for one more window).
"""

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.helpers import console
from tests.security_review.direct_sagas import unheard_call
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, uuid_of
from toolhub.models import ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus, SweepMark
from toolhub.sagas.recovery import UNHEARD_FAILURES_MARK, sagas_sweep

WINDOW = dt.timedelta(days=7)  # SAGA_UNHEARD_FAILURE_HOURS's default


def _failed_saga(key: str, user: User, *, age: dt.timedelta) -> ToolCall:
    """A direct saga ``key``: a booked step then a failure nobody heard of, both ``age`` old; returns the failure."""
    booked = unheard_call("book", {"item": key}, saga=key, user=user)
    failed = unheard_call("explode", {"reason": "boom"}, saga=key, user=user)
    now = timezone.now()
    ToolCall.objects.filter(pk=booked.pk).update(created_at=now - age, finished_at=now - age)
    ToolCall.objects.filter(pk=failed.pk).update(created_at=now - age, finished_at=now - age)
    return failed


def _assert_held(key: str, failed: ToolCall) -> None:
    saga = Saga.objects.get(key=key)
    assert saga.status == SagaStatus.NEEDS_ATTENTION, saga.status
    assert saga.rollbacks.get().failed_call_id == failed.id
    assert saga.compensations.get().status == CompensationStatus.HELD


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_sweep_back_after_thirty_days_holds_the_failures_of_the_outage(alice: User) -> None:
    """Found: the sweep completed its last tick 30 days ago; a failure of 20 days ago (older than twice
    ``SAGA_UNHEARD_FAILURE_HOURS``) was never read, held or shown. Expect: held for an operator, once."""
    failed = _failed_saga("outage", alice, age=dt.timedelta(days=20))
    SweepMark.objects.create(name=UNHEARD_FAILURES_MARK, reached=timezone.now() - dt.timedelta(days=30) - WINDOW)

    counts = sagas_sweep()

    assert counts["held"] == 1 and counts["rolled_back"] == 0
    _assert_held("outage", failed)
    assert sagas_sweep()["held"] == 0
    assert SweepMark.objects.get(name=UNHEARD_FAILURES_MARK).reached > timezone.now() - WINDOW - dt.timedelta(minutes=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_first_run_holds_every_older_failure_once_a_batch_a_tick(alice: User) -> None:
    """Found: failures from before the repair existed (60 and 40 days old at the upgrade) were never read. Expect: no
    mark is a first run: each is held once, ``limit`` read a tick (one here), the next tick carrying on; then the
    mark is set and nothing is held again."""
    oldest = _failed_saga("before-60", alice, age=dt.timedelta(days=60))
    older = _failed_saga("before-40", alice, age=dt.timedelta(days=40))
    assert not SweepMark.objects.exists()

    first = sagas_sweep(limit=1)
    _assert_held("before-60", oldest)
    assert not Saga.objects.filter(key="before-40", rollbacks__isnull=False).exists()
    second = sagas_sweep(limit=1)
    _assert_held("before-40", older)

    assert (first["held"], second["held"]) == (1, 1)
    while SweepMark.objects.get(name=UNHEARD_FAILURES_MARK).reached < timezone.now() - WINDOW - dt.timedelta(minutes=1):
        assert sagas_sweep(limit=1)["held"] == 0
    assert sagas_sweep()["held"] == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_the_held_scan_reads_a_batch_on_a_first_run_and_one_tick_after(alice: User) -> None:
    """Expect (cost): 5,000 handled failures of weeks ago are read ``limit`` a tick on the first run (no statement's
    subquery runs more than ``limit`` times), and once the mark is set a tick reads none of them."""
    template = ToolCall.objects.create(tool_name="book", status="failed", tenant="acme", saga_id="x")
    clone(
        ToolCall,
        template,
        5_000,
        id=uuid_of("cg"),
        saga_id="'old-' || g",
        created_at=ago("60 * 24 * 14 + g"),
        finished_at=ago("60 * 24 * 14 + g"),
    )
    analyze()

    first = explained(lambda: sagas_sweep(limit=50))
    assert max(max_loops(plan) for _, plan in first) <= 50, first
    SweepMark.objects.filter(name=UNHEARD_FAILURES_MARK).update(reached=timezone.now() - WINDOW)
    steady = explained(sagas_sweep)
    assert max(max_loops(plan) for _, plan in steady) < 5, steady


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_the_dashboard_shows_the_sagas_needing_attention_of_the_viewers_tenants(
    alice: User, acme_operator: User, globex_operator: User
) -> None:
    """Found: the admin index's dashboard showed calls and approvals only: a saga held for an operator showed
    nowhere they look first. Expect: a "sagas needing attention" figure linking to the sagas list's filter, counting
    the viewer's tenants' sagas only."""
    _failed_saga("late", alice, age=dt.timedelta(days=9))
    sagas_sweep()
    Saga.objects.create(key="theirs", tenant="globex", status=SagaStatus.NEEDS_ATTENTION)

    ours = console(acme_operator).get("/admin/").content.decode()
    theirs = console(globex_operator).get("/admin/").content.decode()

    link = '<a href="/admin/sagas/saga/?attention=yes">{}</a></span>\n      <span class="toolhub-figure-label">'
    assert link.format(1) + "sagas needing attention" in ours, ours
    assert link.format(1) + "sagas needing attention" in theirs  # their own saga, not acme's
    Saga.objects.filter(key="theirs").delete()
    theirs = console(globex_operator).get("/admin/").content.decode()
    assert link.format(0) + "sagas needing attention" in theirs


@pytest.mark.django_db
def test_the_dashboard_figure_costs_one_query_however_many_sagas(acme_operator: User) -> None:
    """Expect: the index issues as many queries with several more sagas needing attention (one ``COUNT``)."""
    client = console(acme_operator)
    Saga.objects.create(key="a", tenant="acme", status=SagaStatus.NEEDS_ATTENTION)
    client.get("/admin/")
    with CaptureQueriesContext(connection) as few:
        assert ">1</a>" in client.get("/admin/").content.decode()
    for index in range(5):
        Saga.objects.create(key=f"more-{index}", tenant="acme", status=SagaStatus.NEEDS_ATTENTION)
    with CaptureQueriesContext(connection) as many:
        assert ">6</a>" in client.get("/admin/").content.decode()
    assert len(many.captured_queries) == len(few.captured_queries)
    assert sum("sagas_saga" in query["sql"] for query in many.captured_queries) == 1
