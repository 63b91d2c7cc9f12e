# The sagas sweep reads unheard failures by when they failed (review cl): a step that waited longer than
# SAGA_UNHEARD_FAILURE_HOURS before failing was behind the sweep's window and mark by when it was asked for.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0041_failed_direct_step_index"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="toolcall", name="toolcall_failed_direct_step"),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                condition=models.Q(("run_id__isnull", True), ("status", "failed"), models.Q(("saga_id", ""), _negated=True)),
                fields=["finished_at"],
                name="toolcall_failed_direct_step",
            ),
        ),
    ]
