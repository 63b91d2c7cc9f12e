"""Review e (2026-12-07): PostgreSQL statements whose plan depends on table statistics, and the saga trail's rewrite.

The plans were first read under statistics older than the rows (written in the test, never ANALYZEd); what that state
holds depends on what earlier tests left in ``pg_class`` (ANALYZE keeps its sizes through a rollback: review w), so
the tests now analyze the tables after writing the rows, as autovacuum would have them.

Findings (each test failed on the code as found, main at 8711560, and passes now):

1. The saga trail's read of the calls made undoing a saga's steps (``saga_audit_events``, every page of
   ``/admin/sagas/saga/{id}/`` and ``.../audit-events/``) filtered the JSON ``context->'compensates'`` over "the
   tenant's calls since the saga began" (``toolcall_tenant_created``): no index holds that key, so each page read
   every call the tenant made since the saga began, whatever the saga's size (200 undoing calls, 3,000 other calls:
   3,202 rows read). A saga opened months ago in a busy tenant read months of calls on each view. Now a partial
   index on ``(context->'compensates', tenant)`` holds the undoing calls only (migration 0053) and the read names
   the steps and the tenant: it reads the saga's undoing calls and nothing else
   (``test_the_saga_trail_reads_its_undoing_calls_not_the_tenants_calls_since``).

Checked and holding:
- The saga trail's paging (``toolhub/sagas/admin_trail.py``): keyed by ``(created_at, id)`` in the same order the
  events are listed, so ties on ``created_at`` (bulk-written events share one) are each listed once; ``before`` counts
  exactly the events up to the key; the events' statement is one ``call_id = ANY(...) OR (run_id, saga.%)`` filter
  (a hashed array, no subplan), each page four or six statements (pinned by reviews gc, gl).
- ``held_inner_outcome``'s ``Exists(_held_once())`` under an OR runs as a per-row index probe on the events'
  ``call_id`` (one loop per inner call of the attempt, never a hashed subplan over every held event), with the tables
  analyzed (300 inner calls, 3,000 held events of other calls: 300 loops of 0 rows)
  (``test_held_inner_calls_are_probed_per_call_not_hashed_over_every_held_event``).
- ``sagas_visible_to`` for a requester (``Q(pk__in=own) | Q(pk__in=opened)``): two hashed subplans, each run once
  (loops 1), never per saga.

Left for a next review (measured, not fixed): that same requester's list walks the sagas by time and filters each
through the hashed subplans: with 3,000 sagas of others, a page of alice's one saga read all 3,001 (one pass, not a
loop per row; rows read grow with the other sagas). Reading the requester's saga ids first would bound it.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.security_review.query_plans import analyze, clone, json_plans, rows_read
from tests.security_review.test_review_2026_12_06_gc import (
    _rolled_back_saga,
    _undoing_calls_with_events,
    book_gc_seat,
    unbook_gc_seat,
)
from tests.testapp.tools import record_effect
from toolhub.models import AuditEvent, ToolCall
from toolhub.sagas.admin_trail import trail_page
from toolhub.sagas.compensating import held_inner_outcome
from toolhub.sagas.models import Compensation
from toolhub.sagas.selectors import saga_audit_events
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_saga_trail_reads_its_undoing_calls_not_the_tenants_calls_since(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the saga trail found the calls made undoing the saga's steps by a JSON key no index holds, among every
    call of the tenant since the saga began: a page read all of them (3,202 rows for a saga of 200 undoing calls).
    Expect: a page reads the saga's undoing calls (no more than twice as many rows), with the tables analyzed after the
    rows, and still lists every one's events."""
    with registry.temporarily(book_gc_seat, unbook_gc_seat, record_effect):
        saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks)
    made = _undoing_calls_with_events(saga, 200)
    step = Compensation.objects.get(saga=saga).step_call
    # The tenant's other work since the saga began: calls of no saga.
    clone(
        ToolCall,
        step,
        3000,
        id="gen_random_uuid()",
        context="'{}'::jsonb",
        saga_id="''",
        created_at="clock_timestamp()",
    )
    analyze()
    analyze()
    plans = json_plans(lambda: trail_page(saga))
    read = sum(rows_read(plan, ToolCall._meta.db_table) for _, plan in plans)
    assert read <= 2 * len(made), f"a page of the saga's trail read {read} calls for {len(made)} undoing calls"
    listed = set(saga_audit_events(saga).values_list("call_id", flat=True))
    assert made <= listed


def test_held_inner_calls_are_probed_per_call_not_hashed_over_every_held_event(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holds: ``held_inner_outcome``'s ``EXISTS`` (ever held, in the events) sits under an OR, which PostgreSQL may
    plan as a hashed subplan reading every held event of every call.
    Expect: with the tables analyzed after the rows, it probes the events' ``call_id`` index once per inner call of the
    attempt; the held events of other calls are never read."""
    with registry.temporarily(book_gc_seat, unbook_gc_seat, record_effect):
        saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks)
    undo = Compensation.objects.select_related("call", "step_call").get(saga=saga)
    inner = f"jsonb_build_object('parent_call_id', '{undo.call_id}')"
    clone(
        ToolCall,
        undo.step_call,
        300,
        id="gen_random_uuid()",
        kind="'inner'",
        context=inner,
        saga_id="''",
        created_at="clock_timestamp()",
    )
    event = AuditEvent.objects.filter(call_id=undo.step_call_id).first()
    assert event is not None
    clone(AuditEvent, event, 3000, chain="556", seq="g", call_id="gen_random_uuid()", status="'pending_approval'")
    analyze()
    analyze()
    plans = json_plans(lambda: held_inner_outcome(undo.call))
    read = sum(rows_read(plan, AuditEvent._meta.db_table) for _, plan in plans)
    assert read < 300, f"the held check read {read} events for 300 inner calls"
