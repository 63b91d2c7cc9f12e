# The sagas sweep reads the steps of agent runs too (review da): a run step succeeding unheard after its run's saga
# was rolled back was never compensated, the index and the scan covering direct saga steps only.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0044_remote_tool_output_schema_pinned"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="toolcall",
            name="toolcall_ended_direct_step",
        ),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                condition=models.Q(
                    ("status__in", ["cancelled", "expired", "needs_attention", "rejected", "succeeded"]),
                    models.Q(("run_id__isnull", False), models.Q(("saga_id", ""), _negated=True), _connector="OR"),
                ),
                fields=["finished_at"],
                name="toolcall_ended_saga_step",
            ),
        ),
    ]
