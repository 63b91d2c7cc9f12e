"""Review 2026-12-06 eh: a compensation's tenant is its saga's, whichever way the row is written (reviews dx and ef).

Review of reviews dx and ef (tenant-ordered indexes, ``Compensation.tenant``), on PostgreSQL. Each finding's test
failed on the reviewed code (main at 0fe5faa) and passes now.

Findings:

1. ``Compensation.tenant`` was the saga's only when ``save()`` made a row without one: a row made with another
   tenant (``create(tenant=...)``, ``bulk_create``), a ``QuerySet.update`` of its saga or tenant, or a saga whose
   tenant changed left a compensation of acme's saga carrying globex, listed on globex's admin page (which scopes by
   ``Compensation.tenant``) while the API and selectors (``saga__in=sagas_visible_to``, ``saga__tenant``) showed it
   to acme. Fixed: the database holds it (sagas 0013): a foreign key ``(saga_id, tenant)`` to the saga's unique
   ``(id, tenant)`` (``saga_id_tenant``), ``ON UPDATE CASCADE`` (a saga's new tenant reaches its compensations);
   ``save()`` takes the saga's tenant for every new row, so the model paths never reach the constraint.

2. Review dr's open point, decided: the sweep's ``oldest_open_write`` dropped a session whose ``xact_start`` it may
   not read (another role's, e.g. the owner's ``migrate`` or a process run as a second role: PostgreSQL shows such a
   session's ``backend_xid`` but hides its start without ``pg_read_all_stats``), so its marks moved past that open
   write silently. ``toolhub_db_roles`` does not grant ``pg_read_all_stats`` (it shows the application role every
   session's query text in the cluster, arguments included) and no deploy check can see a transaction to come.
   Fixed in ``_OLDEST_OPEN_WRITE_SQL``/``marked_batch``: such a session counts when its role may write the calls
   (``has_table_privilege``; a reporting role may not), as begun before any mark: no mark moves while it is open, and
   the tick warns naming its role, pid and application.

Checked and holding:
- Every write path of a compensation in the code is ``plan_compensation``'s ``objects.create`` (no ``bulk_create``,
  no ``update(saga=...)``, no ``update(tenant=...)``; ``services`` updates only ``rollback``).
- With the constraint the two scopings cannot disagree, so the readers that still scope through the saga
  (``selectors.compensations_visible_to``, the compensation lookup by step) need no change.
- Migrations on a database with data (3 compensations of a saga, calls of a user): ``migrate sagas 0011`` and
  ``migrate toolhub 0047`` reverse cleanly (0012's backfill reverses as a no-op with the column dropped; 0048 drops its
  statistics), and ``migrate`` forward again backfills the tenant and adds the key over the existing rows (read).
- Deleting a user with 100,000 calls (and 100,000 of another user): Django's ``UPDATE ... SET user_id = NULL WHERE
  user_id IN (...)`` and PostgreSQL's own key check (``SELECT 1 ... WHERE user_id = $1 FOR KEY SHARE``) read
  ``toolcall_user_tenant_created`` (Bitmap Index Scan, EXPLAIN), no sequential scan, after toolhub 0049.
- The webhook deliveries admin's filter (``payload__tenant``: ``(payload -> 'tenant') = '"acme"'::jsonb``, and the
  ``IN``/``IS NULL``/``''`` form for a viewer of several tenants) matches ``webhook_tenant_created``'s expression
  (Index Scan Backward; a BitmapOr of it for the several-tenant form), EXPLAIN.
"""

import datetime as dt
import logging

import psycopg
import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tests.security_review.pg_races import dsn
from toolhub.models import CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, Saga, SweepMark
from toolhub.sagas.sweep_marks import marked_batch, oldest_open_write

pytestmark = pytest.mark.postgres


def _step(tenant: str) -> ToolCall:
    return ToolCall.objects.create(tool_name="saga_step", status=CallStatus.SUCCEEDED, tenant=tenant)


def _fields(saga: Saga, sequence: int) -> dict:
    return {
        "saga": saga,
        "sequence": sequence,
        "step_call": _step(saga.tenant),
        "step_tool": "saga_step",
        "tool_name": "undo_saga_step",
    }


def _refused(write) -> bool:
    """Whether the database refuses ``write`` (its deferred constraints checked at once)."""
    try:
        with transaction.atomic():
            write()
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    except IntegrityError:
        return True
    return False


@pytest.mark.django_db
def test_a_compensation_of_acmes_saga_never_carries_another_tenant() -> None:
    """Found: a compensation made with another tenant, bulk-created, or moved by ``QuerySet.update`` kept a tenant
    other than its saga's (globex's admin page listed acme's compensation). Expect: every path leaves the saga's
    tenant, or is refused by the database."""
    # given a saga in acme and one in globex
    for slug in ("acme", "globex"):
        Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    acme = Saga.objects.create(key="eh-acme", tenant="acme")
    globex = Saga.objects.create(key="eh-globex", tenant="globex")

    # when a compensation of acme's saga is made, or moved, with globex's tenant, each way there is
    made = Compensation.objects.create(**_fields(acme, 1), tenant="globex")
    saved = Compensation(**_fields(acme, 2), tenant="globex")
    saved.save()
    refused = {
        "bulk_create": _refused(
            lambda: Compensation.objects.bulk_create([Compensation(**_fields(acme, 3), tenant="globex")])
        ),
        "update(tenant=)": _refused(lambda: Compensation.objects.filter(pk=made.pk).update(tenant="globex")),
        "update(saga=)": _refused(lambda: Compensation.objects.filter(pk=made.pk).update(saga=globex)),
    }
    Saga.objects.filter(pk=acme.pk).update(tenant="initech")

    # then each one made holds its saga's tenant, the others are refused, and a saga's new tenant reaches its steps
    assert [c.tenant for c in Compensation.objects.filter(pk__in=[made.pk, saved.pk]).order_by("sequence")] == [
        "initech",
        "initech",
    ]
    assert refused == {"bulk_create": True, "update(tenant=)": True, "update(saga=)": True}
    assert not Compensation.objects.exclude(tenant="initech").exists()


@pytest.mark.django_db
def test_the_sweep_never_marks_past_a_write_of_a_role_whose_start_it_cannot_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: ``oldest_open_write`` left out a session whose ``xact_start`` it may not read (another role's, without
    ``pg_read_all_stats``, which ``toolhub_db_roles`` does not grant): the marks moved past the start of that role's
    open write, silently, and rows it stamped were never read. Expect: the open write is found, no mark moves while it
    is open, and the tick warns naming its role and session."""
    # given another role's session (a superuser's here) with a write transaction open in this database
    writer = psycopg.connect(**dsn(), application_name="eh-writer")
    try:
        writer.execute("SELECT pg_current_xact_id()")
        # and the sweep running as a role that may write the calls but not read other roles' transactions' starts
        with connection.cursor() as cursor:
            cursor.execute("CREATE ROLE eh_sweeper")
            cursor.execute("GRANT SELECT, INSERT, UPDATE ON toolhub_toolcall, sagas_sweepmark TO eh_sweeper")
            cursor.execute("SET ROLE eh_sweeper")
        try:
            # when the sweep reads its mark
            oldest = oldest_open_write()
            with caplog.at_level(logging.WARNING, logger="toolhub.sagas.sweep_marks"):
                batch, move = marked_batch(
                    "eh", ToolCall.objects.all(), until=timezone.now(), margin=dt.timedelta(seconds=5), limit=10
                )
                move()
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET ROLE")
    finally:
        writer.close()

    # then the writer's session is the oldest open write, its start unknown, and no mark moved
    assert oldest is not None and (oldest.application, oldest.started) == ("eh-writer", None)
    assert batch == [] and not SweepMark.objects.filter(name="eh").exists()
    assert "eh-writer" in caplog.text and "pg_read_all_stats" in caplog.text
