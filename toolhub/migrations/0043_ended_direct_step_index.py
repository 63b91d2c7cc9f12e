# The sagas sweep reads direct saga steps that settled unheard (review cs): a step succeeding after its saga was
# rolled back, or ending after it had carried a failure on, was never read again.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0042_failed_direct_step_by_finished_at"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                condition=models.Q(
                    ("run_id__isnull", True),
                    ("status__in", ["cancelled", "expired", "needs_attention", "rejected", "succeeded"]),
                    models.Q(("saga_id", ""), _negated=True),
                ),
                fields=["finished_at"],
                name="toolcall_ended_direct_step",
            ),
        ),
    ]
