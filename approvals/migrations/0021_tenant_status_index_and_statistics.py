"""The desk reads its tenant's queue also with statistics (review y): an index keyed on the status and the planner's
statistics over ``(tenant, status)``.

Analyzed, with one tenant's queue long and another's short, the planner took the partial index
``approval_tenant_pending`` (``WHERE status = 'pending'``) to hold half the queue for either tenant (per-column
statistics) and read the whole queue on the status index. With the status a key column its condition is an index
condition, and the statistics tell the planner how few of a tenant's requests are pending.
"""

from django.db import migrations, models

STATISTICS = "approval_tenant_status_stats"


def create_statistics(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} (mcv) ON tenant, status FROM approvals_approvalrequest"
        )


def drop_statistics(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0020_approvalrequest_approval_tenant_pending"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="approvalrequest",
            name="approval_tenant_pending",
        ),
        migrations.AddIndex(
            model_name="approvalrequest",
            index=models.Index(fields=["tenant", "status", "created_at", "id"], name="approval_tenant_status"),
        ),
        migrations.RunPython(create_statistics, drop_statistics),
    ]
