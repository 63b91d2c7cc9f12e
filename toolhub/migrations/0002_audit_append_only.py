"""On PostgreSQL, refuse UPDATE and DELETE on audit events: the trail is append-only in the database too."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION toolhub_audit_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'toolhub_auditevent is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER toolhub_audit_append_only
    BEFORE UPDATE OR DELETE ON toolhub_auditevent
    FOR EACH ROW EXECUTE FUNCTION toolhub_audit_refuse_change();
"""

DROP = """
DROP TRIGGER IF EXISTS toolhub_audit_append_only ON toolhub_auditevent;
DROP FUNCTION IF EXISTS toolhub_audit_refuse_change();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
