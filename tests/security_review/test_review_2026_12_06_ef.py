"""Review 2026-12-06 ef: the compensations admin list and a member's calls list read their tenant's rows only.

Follows review dx (its two reported gaps), on PostgreSQL, by EXPLAIN ANALYZE row counts of the listed table
(``test_review_2026_12_06_dx._walks``), never by timing. Each finding's test failed on the reviewed code (main at
3d03487) and passes now.

Findings:

1. acme's operator's compensations list (tenant through ``saga__tenant``, ordered ``-saga_id, -sequence``) walked the
   compensation index from the newest saga down past every newer globex compensation (30,102 rows read to show 100),
   merge-joined with the saga primary key from the newest saga down (30,101 sagas read, 30,000 of them globex's).
   Fixed: a compensation holds its saga's tenant (``Compensation.tenant``, set from the saga in ``save()`` for every
   way one is made, backfilled by sagas 0012) indexed ``(tenant, saga, sequence)``; the admin scopes by it and reads
   the page's sagas by their keys in a second query (``prefetch_related``) instead of a join.
2. ``/api/v1/calls/`` for a member (``user = me AND (tenant IN theirs OR tenant = '')``, ``-created_at, -id``) with
   30,000 newer calls of theirs in a tenant they left and 30,000 of other members in acme walked the ``created_at``
   index (45,052 rows removed to show 51): the planner took user and tenant as independent. Fixed (toolhub 0048): an
   index ``(user, tenant, created_at)`` and PostgreSQL statistics over ``(user_id, tenant)`` (mcv, dependencies);
   the index alone was not taken (same walk).

Checked and holding:
- The compensations page's bounded count reads acme's compensations only (``compensation_tenant_saga``), no join.
- A member of acme only, with 30,000 newer calls in globex and acme holding few other calls: the page read acme's 100
  through ``toolcall_tenant_created`` even before the fix (the planner finds the small tenant); the failing shape
  needs the tenant to be big too (test below).
- Review cf's compensations plan test now expects the new index (same order, a tenant's rows only).
"""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.helpers import console
from tests.posture.test_admin_query_counts import ROWS, World
from tests.security_review.conftest import client_for
from tests.security_review.query_plans import analyze, clone, uuid_of
from tests.security_review.test_review_2026_12_06_cr import operator_world  # noqa: F401
from tests.security_review.test_review_2026_12_06_dx import _walks
from toolhub.models import CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, Saga

pytestmark = pytest.mark.postgres

#: globex's compensations, on sagas newer than acme's, and how many sagas hold them.
BIG, BIG_SAGAS = 30_000, 30_000
#: acme's compensations: a few pages.
ACME, ACME_SAGAS = 2_000, 2_000
#: One more second a row, in SQL over ``g``.
SECOND = "g * interval '1 second'"


def _compensations(tenant: str, rows: int, sagas: int) -> None:
    """``rows`` compensations of ``tenant`` over ``sagas`` new sagas of it, each step its own call, cloned in SQL."""
    Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant.title()})
    first = Saga.objects.create(key=f"{tenant}-0", tenant=tenant, last_sequence=rows)
    clone(Saga, first, sagas - 1, key=f"'{tenant}-' || g")
    step = ToolCall.objects.create(tool_name="saga_step", status=CallStatus.SUCCEEDED, tenant=tenant)
    clone(ToolCall, step, rows, id=uuid_of(f"ef-{tenant}"))
    template = Compensation.objects.create(
        saga=first, sequence=0, step_call=step, step_tool="saga_step", tool_name="undo_saga_step"
    )
    saga_of = f"(SELECT s.id FROM sagas_saga s WHERE s.tenant = '{tenant}' AND s.key = '{tenant}-' || (g % {sagas}))"
    clone(Compensation, template, rows, saga_id=saga_of, sequence="g", step_call_id=uuid_of(f"ef-{tenant}"))


def test_a_small_tenants_compensations_page_reads_none_of_a_big_tenants_rows(
    operator_world: World,  # noqa: F811
) -> None:
    """Found: acme's compensations page walked the ``(saga, sequence)`` index from the newest saga down, past every
    compensation of globex's newer sagas (30,101 rows read for 100 shown). Expect: every statement of the page reads a
    bounded number of compensations, however many globex holds."""
    # given acme's 2,000 compensations, then globex's 30,000 on newer sagas
    for index in range(3):
        ROWS[Compensation](operator_world, index)
    _compensations("acme", ACME, ACME_SAGAS)
    _compensations("globex", BIG, BIG_SAGAS)
    analyze()
    url = reverse("admin:sagas_compensation_changelist")

    # when acme's operator opens the list (measured over the compensations, then over their sagas)
    walks = [
        walk
        for table in (Compensation._meta.db_table, Saga._meta.db_table)
        for walk in _walks(table, lambda: console(operator_world.staff).get(url))
    ]

    # then no statement reads globex's compensations, nor globex's sagas to show acme's
    assert walks == [], "\n\n".join(walks)


def test_a_members_calls_page_reads_none_of_their_calls_in_a_tenant_they_left(alice: User) -> None:
    """Found: ``/api/v1/calls/`` for a member (``user = me AND tenant IN (theirs)``, ``-created_at, -id``) walked an
    index on the user alone by time, past every newer call of theirs in a tenant they left (globex's 30,000 read to show
    acme's 100). Expect: every statement of the page reads a bounded number of calls, however many globex holds."""
    # given alice's 100 calls in acme, and 30,000 newer ones from globex, a tenant she has left
    Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    call = ToolCall.objects.create(tool_name="lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    clone(ToolCall, call, 99, id=uuid_of("ef-acme-call"), created_at="t.created_at - g * interval '1 second'")
    clone(ToolCall, call, BIG, id=uuid_of("ef-globex-call"), tenant="'globex'", created_at=f"t.created_at + {SECOND}")
    # and acme's 30,000 calls made for other members, older and newer: the tenant's index is no short cut either
    bob = User.objects.create_user("ef-bob")
    spread = f"t.created_at + (g - {BIG // 2}) * interval '1 second'"
    clone(ToolCall, call, BIG, id=uuid_of("ef-bob-call"), user_id=str(bob.pk), created_at=spread)
    analyze()

    # when alice reads her calls' first page
    walks = _walks(ToolCall._meta.db_table, lambda: client_for(alice).get("/api/v1/calls/"))

    # then no statement reads her globex calls
    assert walks == [], "\n\n".join(walks)
