"""A member's calls list reads their calls of their tenants only (review ef): an index and the planner's statistics.

The planner took a user's calls and a tenant's as independent and walked the calls by time, past the member's calls
of a tenant they left; statistics over ``(user_id, tenant)`` tell it how few of a user's calls a tenant holds.
"""

from django.conf import settings
from django.db import migrations, models

STATISTICS = "toolcall_user_tenant_stats"


def create_statistics(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} (mcv, dependencies) ON user_id, tenant FROM toolhub_toolcall"
        )


def drop_statistics(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0047_api_token_keys_as_digests"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(fields=["user", "tenant", "created_at"], name="toolcall_user_tenant_created"),
        ),
        migrations.RunPython(create_statistics, drop_statistics),
    ]
