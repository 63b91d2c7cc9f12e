"""Review cl (2026-12-06): the review of reviews cf (indexed sorts, ``small_table``) and cg (the sweep's mark).

Each finding's test failed on the reviewed code (main at 9adc9d6) and passes now.

Findings:

1. The sagas sweep read unheard failures by when they were asked for (``created_at``), its mark too, but a failure
   enters ``toolcall_failed_direct_step`` when it fails: a direct step that waited longer than
   ``SAGA_UNHEARD_FAILURE_HOURS`` (an approval, an external result, a queue) and then failed unheard was behind both
   the automatic window and the mark the moment it failed, and was never rolled back, held or shown (review ce's
   fixed second window caught it for one more window; the mark for none). Fixed: the index and both scans key on
   ``finished_at`` (toolhub 0042): the window and the mark count from when the failure settled.

Checked and holds:
- ``compared_columns``: ``?chain=3&chain=3`` (two values: no equality), ``?chain__in=3``, ``?created_at__date=``
  (a transform), ``?saga__tenant=`` (a related column, not the key) count nothing; ``?chain=`` on a key column is
  Django's invalid lookup (``?e=1``), no scan. The list filters whose parameter is a column name (``TenantFilter``,
  ``ActorFilter``, approvals' ``StatusFilter``) ignore an empty or ``all`` value yet count as an equality, but the
  only columns that unlocks (``created_at``) have indexes of their own: latent, not reachable today.
- ``small_table`` sorts and the tenant boundary: a column naming a withheld tool group is ``ShownRelation`` (no order
  field), the catalogue's group column is unsorted for viewers within tenants (``group_unsorted``); every other
  relation column of a small-table list shows the name it sorts by.
- ``small_table`` sizes: tokens, memberships and users are one row per person an administrator adds; remote MCP
  tools are bounded by each server's selected list (removed ones are kept, marked ``removed``).
- The mark under two sweepers (conditional ``UPDATE`` from the value read, ``get_or_create`` for the first) and a
  rollback raising mid-batch (the mark is written after the batch: it never moves past an unhandled failure; the
  same failure raises again each tick, loudly); the first run reads ``limit`` failures a tick.
"""

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.security_review.direct_sagas import unheard_call
from toolhub.models import ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus, SweepMark
from toolhub.sagas.recovery import sagas_sweep

WINDOW = dt.timedelta(days=7)  # SAGA_UNHEARD_FAILURE_HOURS's default


def _late_failure(key: str, user: User, *, asked: dt.timedelta, failed: dt.timedelta) -> ToolCall:
    """A direct saga ``key``: a step booked ``asked`` ago, then a call asked for then that failed ``failed`` ago."""
    booked = unheard_call("book", {"item": key}, saga=key, user=user)
    failure = unheard_call("explode", {"reason": "boom"}, saga=key, user=user)
    now = timezone.now()
    ToolCall.objects.filter(pk=booked.pk).update(created_at=now - asked, finished_at=now - asked)
    ToolCall.objects.filter(pk=failure.pk).update(created_at=now - asked, finished_at=now - failed)
    return failure


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_failure_asked_for_before_the_mark_and_failing_after_is_rolled_back(alice: User) -> None:
    """Found: a direct step asked for eight days ago (its approval, or an external result, took that long) failed a
    minute ago, unheard; the sweep had run a moment before, its mark at ``now - W``: the automatic window
    (asked for within ``W``) and the held scan (asked for from the mark) both passed it, for ever. Expect: a failure
    heard of late within ``W`` of failing is rolled back by the sweep, as any other, once."""
    assert sagas_sweep()["held"] == 0  # a completed scan: the mark at now - W
    failure = _late_failure("slow", alice, asked=WINDOW + dt.timedelta(days=1), failed=dt.timedelta(minutes=1))

    counts = sagas_sweep()

    assert counts["rolled_back"] == 1 and counts["held"] == 0, counts
    saga = Saga.objects.get(key="slow")
    assert saga.rollbacks.get().failed_call_id == failure.id
    assert saga.compensations.get().status == CompensationStatus.SUCCEEDED
    assert saga.status == SagaStatus.COMPENSATED
    assert sagas_sweep()["rolled_back"] == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_failure_settled_behind_the_mark_while_the_sweep_stopped_is_held(alice: User) -> None:
    """Found: the sweep's last scan set its mark 20 days ago; a step asked for 30 days ago failed 10 days ago, unheard,
    while the sweep stopped: asked for before the mark, the held scan never read it. Expect: held for an operator."""
    assert sagas_sweep()["held"] == 0
    SweepMark.objects.update(reached=timezone.now() - dt.timedelta(days=20))
    failure = _late_failure("stopped", alice, asked=dt.timedelta(days=30), failed=dt.timedelta(days=10))

    counts = sagas_sweep()

    assert counts["held"] == 1 and counts["rolled_back"] == 0, counts
    saga = Saga.objects.get(key="stopped")
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert saga.rollbacks.get().failed_call_id == failure.id
    assert saga.compensations.get().status == CompensationStatus.HELD
