"""A compensation holds its saga's tenant (backfilled here), indexed for a tenant's list (review ef)."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def backfill(apps, schema_editor):
    compensation = apps.get_model("sagas", "Compensation")
    saga = apps.get_model("sagas", "Saga")
    alias = schema_editor.connection.alias
    tenant = saga.objects.using(alias).filter(pk=OuterRef("saga_id")).values("tenant")[:1]
    compensation.objects.using(alias).update(tenant=Subquery(tenant))


class Migration(migrations.Migration):
    dependencies = [
        ("sagas", "0011_saga_tenant_ordered_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="compensation",
            name="tenant",
            field=models.CharField(blank=True, editable=False, max_length=100),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="compensation",
            index=models.Index(fields=["tenant", "saga", "sequence"], name="compensation_tenant_saga"),
        ),
    ]
