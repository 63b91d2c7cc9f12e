"""A tenant's slug is fixed once it exists, and a deleted tenant's slug is retired, never issued again.

Calls, runs, approval requests, audit events and chains, sagas, remote MCP credentials and the built-in tools'
workspace directory name their tenant by slug: a renamed tenant lost them all, and a new tenant given the old
slug (after a rename or a deletion) took them over (found by a probe). The model refuses both; a trigger, on
PostgreSQL and SQLite alike, also refuses an UPDATE of the slug on any other path (a bulk update, raw SQL).
"""

from django.db import migrations, models

POSTGRESQL = """
CREATE OR REPLACE FUNCTION toolhub_tenant_refuse_slug_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'toolhub_tenant: a tenant''s slug cannot change (% to %): its rows name it', OLD.slug, NEW.slug
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER toolhub_tenant_slug_fixed
    BEFORE UPDATE OF slug ON toolhub_tenant
    FOR EACH ROW WHEN (NEW.slug IS DISTINCT FROM OLD.slug)
    EXECUTE FUNCTION toolhub_tenant_refuse_slug_change();
"""

POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS toolhub_tenant_slug_fixed ON toolhub_tenant;
DROP FUNCTION IF EXISTS toolhub_tenant_refuse_slug_change();
"""

SQLITE = """
CREATE TRIGGER toolhub_tenant_slug_fixed
    BEFORE UPDATE OF slug ON toolhub_tenant
    FOR EACH ROW WHEN NEW.slug IS NOT OLD.slug
    BEGIN SELECT RAISE(ABORT, 'toolhub_tenant: a tenant''s slug cannot change: its rows name it'); END;
"""

SQLITE_DROP = "DROP TRIGGER IF EXISTS toolhub_tenant_slug_fixed;"


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor in ("postgresql", "sqlite"):
        schema_editor.execute(POSTGRESQL if vendor == "postgresql" else SQLITE, params=None)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor in ("postgresql", "sqlite"):
        schema_editor.execute(POSTGRESQL_DROP if vendor == "postgresql" else SQLITE_DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0028_audit_checkpoint_numbering")]

    operations = [
        migrations.CreateModel(
            name="RetiredTenantSlug",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(unique=True)),
                ("audit_chain_base", models.PositiveBigIntegerField(editable=False, null=True)),
                ("retired_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AlterField(
            model_name="tenant",
            name="slug",
            field=models.SlugField(
                help_text="Fixed once the tenant exists: every row of the tenant names it.", unique=True
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
