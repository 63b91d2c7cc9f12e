"""Stored audit checkpoints, and on PostgreSQL triggers that keep every audit table append-only.

A statement trigger refuses TRUNCATE of the events, the chain heads and the checkpoints (the row
triggers of 0002 never fire for TRUNCATE); checkpoints refuse UPDATE and DELETE like events, and a
chain head may move forward but never be deleted. The owner could still disable these triggers, which
is why the application connects with a role that is not the owner (``manage.py toolhub_db_roles``).
"""

from django.db import migrations, models

AUDIT_TABLES = ("toolhub_auditevent", "toolhub_auditchainhead", "toolhub_auditcheckpoint")

CREATE = """
CREATE OR REPLACE FUNCTION toolhub_audit_refuse() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

ROW_GUARDS = (
    ("toolhub_audit_append_only", "UPDATE OR DELETE", "toolhub_auditcheckpoint"),
    ("toolhub_audit_head_kept", "DELETE", "toolhub_auditchainhead"),
)


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(CREATE, params=None)
    for table in AUDIT_TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER toolhub_audit_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION toolhub_audit_refuse()",
            params=None,
        )
    for name, events, table in ROW_GUARDS:
        schema_editor.execute(
            f"CREATE TRIGGER {name} BEFORE {events} ON {table} FOR EACH ROW EXECUTE FUNCTION toolhub_audit_refuse()",
            params=None,
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _events, table in ROW_GUARDS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}", params=None)
    for table in AUDIT_TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS toolhub_audit_no_truncate ON {table}", params=None)
    schema_editor.execute("DROP FUNCTION IF EXISTS toolhub_audit_refuse()", params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0006_cross_tenant_permission")]

    operations = [
        migrations.CreateModel(
            name="AuditCheckpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("seq", models.PositiveBigIntegerField(unique=True)),
                ("created_at", models.DateTimeField()),
                ("body", models.TextField()),
                ("signature", models.CharField(max_length=64)),
            ],
            options={"ordering": ["seq"]},
        ),
        migrations.RunPython(forwards, backwards),
    ]
