"""On PostgreSQL, the record of each ``verify_audit`` run is append-only, like the trail it vouches for.

The console shows the newest record as the proof that the trail was verified: a failed run rewritten as passed
(or deleted) would hide the failure. ``verify_audit`` only ever inserts these rows; triggers refuse UPDATE and
DELETE (0007's ``toolhub_audit_refuse``) and TRUNCATE, and the application's role holds SELECT and INSERT only
(``toolhub.dbroles``).
"""

from django.db import migrations

TABLE = "toolhub_auditverification"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"CREATE TRIGGER toolhub_audit_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
        "FOR EACH ROW EXECUTE FUNCTION toolhub_audit_refuse()",
        params=None,
    )
    schema_editor.execute(
        f"CREATE TRIGGER toolhub_audit_no_truncate BEFORE TRUNCATE ON {TABLE} "
        "FOR EACH STATEMENT EXECUTE FUNCTION toolhub_audit_refuse()",
        params=None,
    )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP TRIGGER IF EXISTS toolhub_audit_no_truncate ON {TABLE}", params=None)
    schema_editor.execute(f"DROP TRIGGER IF EXISTS toolhub_audit_append_only ON {TABLE}", params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0026_audit_head_forward_only")]

    operations = [migrations.RunPython(forwards, backwards)]
