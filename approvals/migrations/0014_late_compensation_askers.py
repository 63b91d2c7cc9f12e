"""Late compensations pending at the upgrade bar everyone whose rollback asked for them.

A step still running when a rollback was asked is compensated once it succeeds, under the newest rollback by then;
``compensation_askers`` now bars the person of every rollback asked between the step's start and that planning, and
a request made before read only the newest one's. Each pending compensation's request is given those people too; a
decided one is left as it was decided.
"""

from typing import Any

from django.db import migrations
from django.db.models import F


def bar_earlier_rollbacks(apps: Any, schema_editor: Any) -> None:
    requests = apps.get_model("approvals", "ApprovalRequest")
    rollbacks = apps.get_model("sagas", "Rollback")
    through = requests.askers.through
    pending = requests.objects.filter(status="pending", call__kind="compensation").values_list(
        "pk", "call__context", "call__tenant"
    )
    rows = []
    for pk, context, tenant in pending.iterator():
        step_id = (context or {}).get("compensates")
        if not step_id:
            continue
        asked = rollbacks.objects.filter(
            saga__compensations__step_call_id=step_id,
            saga__tenant=tenant,
            requested_at__gt=F("saga__compensations__step_call__created_at"),
            requested_at__lte=F("saga__compensations__created_at"),
            asked_by__isnull=False,
        ).values_list("asked_by", flat=True)
        known = set(through.objects.filter(approvalrequest_id=pk).values_list("user_id", flat=True))
        rows += [through(approvalrequest_id=pk, user_id=user_id) for user_id in set(asked) - known]
    through.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0013_pending_compensation_askers"),
    ]

    # Backwards there is nothing to undo: the askers were who asked, whichever code wrote them.
    operations = [migrations.RunPython(bar_earlier_rollbacks, migrations.RunPython.noop)]
