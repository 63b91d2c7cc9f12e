"""Calls made on behalf of a compensation pending at the upgrade bar who asked for that compensation.

An agentic compensation's inner calls (their context names the step it ``compensates``) were given no askers:
``compensation_askers`` answered only for the compensation's own call, so whoever rolled the saga back or retried
the compensation could approve what it did. Each pending such request is given the compensation's askers, as
``compensation_askers`` reads them now; a decided one is left as it was decided.
"""

from typing import Any

from django.db import migrations
from django.db.models import F


def bar_compensation_askers(apps: Any, schema_editor: Any) -> None:
    requests = apps.get_model("approvals", "ApprovalRequest")
    compensations = apps.get_model("sagas", "Compensation")
    rollbacks = apps.get_model("sagas", "Rollback")
    through = requests.askers.through
    pending = (
        requests.objects.filter(status="pending", call__context__compensates__isnull=False)
        .exclude(call__kind="compensation")
        .values_list("pk", "call__context", "call__tenant")
    )
    rows = []
    for pk, context, tenant in pending.iterator():
        step_id = (context or {}).get("compensates")
        if not step_id:
            continue
        own = compensations.objects.filter(step_call_id=step_id, step_call__tenant=tenant)
        asked = {
            *own.values_list("rollback__asked_by", flat=True),
            *own.values_list("retried_by", flat=True),
            *rollbacks.objects.filter(
                saga__compensations__step_call_id=step_id,
                saga__tenant=tenant,
                requested_at__gt=F("saga__compensations__step_call__created_at"),
                requested_at__lte=F("saga__compensations__created_at"),
            ).values_list("asked_by", flat=True),
        } - {None}
        known = set(through.objects.filter(approvalrequest_id=pk).values_list("user_id", flat=True))
        rows += [through(approvalrequest_id=pk, user_id=user_id) for user_id in asked - known]
    through.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0017_tenant_ordered_indexes"),
        ("sagas", "0007_held_for_an_operator"),
    ]

    # Backwards there is nothing to undo: the askers were who asked, whichever code wrote them.
    operations = [migrations.RunPython(bar_compensation_askers, migrations.RunPython.noop)]
