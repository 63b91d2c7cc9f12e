"""A compensation's tenant is its saga's, held by the database (review eh).

``save()`` sets it, but ``bulk_create``, a ``QuerySet.update`` of the saga or the tenant, and a saga whose tenant
changed went past it: globex's admin page (by ``Compensation.tenant``) then listed acme's compensation. On PostgreSQL a
foreign key ``(saga_id, tenant)`` to the saga's unique ``(id, tenant)`` refuses such a row, and carries a saga's new
tenant to its compensations (``ON UPDATE CASCADE``); deferred like Django's own keys, so fixtures load in any order.
"""

from django.db import migrations, models

FOREIGN_KEY = "compensation_saga_tenant_fk"


def add_foreign_key(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"ALTER TABLE sagas_compensation ADD CONSTRAINT {FOREIGN_KEY} FOREIGN KEY (saga_id, tenant) "
            "REFERENCES sagas_saga (id, tenant) ON UPDATE CASCADE ON DELETE NO ACTION DEFERRABLE INITIALLY DEFERRED"
        )


def drop_foreign_key(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE sagas_compensation DROP CONSTRAINT IF EXISTS {FOREIGN_KEY}")


class Migration(migrations.Migration):
    dependencies = [
        ("sagas", "0012_compensation_tenant"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="saga",
            constraint=models.UniqueConstraint(fields=("id", "tenant"), name="saga_id_tenant"),
        ),
        migrations.RunPython(add_foreign_key, drop_foreign_key),
    ]
