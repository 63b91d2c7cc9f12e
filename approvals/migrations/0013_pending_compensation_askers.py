"""Compensation approvals pending at the upgrade get their askers: who rolled the saga back is barred from them too.

``askers`` is filled when a request is made (``compensation_askers``); a request made before it existed has none, so
the person who rolled back could still decide it alone. Each pending compensation's request is given its rollback's
``asked_by`` (``sagas 0005`` read it from the rollback's ``requested_by``); a decided one is left as it was decided.
"""

from typing import Any

from django.db import migrations


def bar_who_rolled_back(apps: Any, schema_editor: Any) -> None:
    requests = apps.get_model("approvals", "ApprovalRequest")
    compensations = apps.get_model("sagas", "Compensation")
    through = requests.askers.through
    pending = requests.objects.filter(status="pending", call__kind="compensation").values_list(
        "pk", "call__context", "call__tenant"
    )
    rows = []
    for pk, context, tenant in pending.iterator():
        step_id = (context or {}).get("compensates")
        if not step_id:
            continue
        asked_by = (
            compensations.objects.filter(step_call_id=step_id, step_call__tenant=tenant)
            .values_list("rollback__asked_by", flat=True)
            .first()
        )
        if asked_by is not None and not through.objects.filter(approvalrequest_id=pk, user_id=asked_by).exists():
            rows.append(through(approvalrequest_id=pk, user_id=asked_by))
    through.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0012_approvalrequest_askers"),
        ("sagas", "0006_compensation_retried_by"),
    ]

    # Backwards there is nothing to undo: the askers were who asked, whichever migration wrote them.
    operations = [migrations.RunPython(bar_who_rolled_back, migrations.RunPython.noop)]
