"""A tool group's name is fixed once the row exists, as a tenant's slug is (migration 0029).

The code names a tool's groups by name (``@tool(group="payments")``), while grants, approval rules and approver
restrictions point at the row: renaming the row silently moved a deny (and who may approve) off the code's tools
(found by a probe). The model refuses a rename; a trigger refuses it on any other path.
"""

from django.db import migrations, models

POSTGRESQL = """
CREATE OR REPLACE FUNCTION toolhub_toolgroup_refuse_rename() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'toolhub_toolgroup: a tool group''s name cannot change (% to %): the code and grants name it',
        OLD.name, NEW.name USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER toolhub_toolgroup_name_fixed
    BEFORE UPDATE OF name ON toolhub_toolgroup
    FOR EACH ROW WHEN (NEW.name IS DISTINCT FROM OLD.name)
    EXECUTE FUNCTION toolhub_toolgroup_refuse_rename();
"""

POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS toolhub_toolgroup_name_fixed ON toolhub_toolgroup;
DROP FUNCTION IF EXISTS toolhub_toolgroup_refuse_rename();
"""

SQLITE = """
CREATE TRIGGER toolhub_toolgroup_name_fixed
    BEFORE UPDATE OF name ON toolhub_toolgroup
    FOR EACH ROW WHEN NEW.name IS NOT OLD.name
    BEGIN SELECT RAISE(ABORT, 'toolhub_toolgroup: a tool group''s name cannot change: the code and grants name it');
    END;
"""

SQLITE_DROP = "DROP TRIGGER IF EXISTS toolhub_toolgroup_name_fixed;"


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor in ("postgresql", "sqlite"):
        schema_editor.execute(POSTGRESQL if vendor == "postgresql" else SQLITE, params=None)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor in ("postgresql", "sqlite"):
        schema_editor.execute(POSTGRESQL_DROP if vendor == "postgresql" else SQLITE_DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0029_retired_tenant_slugs")]

    operations = [
        migrations.AlterField(
            model_name="toolgroup",
            name="name",
            field=models.SlugField(
                help_text="Fixed once the group exists: the code names its tools' groups by it.",
                max_length=100,
                unique=True,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
