"""A tenant's slug is retired however its row is deleted: a trigger, not only the model's ``post_delete`` signal.

0029 retires a deleted tenant's slug in a signal receiver, so a deletion that sends no signal (raw SQL from psql, a
script's ``_raw_delete``, a data migration) left the rows, chains and files naming the slug unclaimed, and the first
tenant given it took them over (found by review bh). As 0029 refuses a rename on any path, this trigger retires the
slug on any path, on PostgreSQL and SQLite alike; the receiver then finds it retired already.
"""

from django.db import migrations

POSTGRESQL = """
CREATE OR REPLACE FUNCTION toolhub_tenant_retire_slug() RETURNS trigger AS $$
BEGIN
    INSERT INTO toolhub_retiredtenantslug (slug, audit_chain_base, retired_at)
    VALUES (OLD.slug, OLD.audit_chain_base, now())
    ON CONFLICT (slug) DO NOTHING;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER toolhub_tenant_slug_retired
    AFTER DELETE ON toolhub_tenant
    FOR EACH ROW EXECUTE FUNCTION toolhub_tenant_retire_slug();
"""

POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS toolhub_tenant_slug_retired ON toolhub_tenant;
DROP FUNCTION IF EXISTS toolhub_tenant_retire_slug();
"""

SQLITE = """
CREATE TRIGGER toolhub_tenant_slug_retired
    AFTER DELETE ON toolhub_tenant
    FOR EACH ROW
    BEGIN
        INSERT OR IGNORE INTO toolhub_retiredtenantslug (slug, audit_chain_base, retired_at)
        VALUES (OLD.slug, OLD.audit_chain_base, strftime('%Y-%m-%d %H:%M:%f', 'now'));
    END;
"""

SQLITE_DROP = "DROP TRIGGER IF EXISTS toolhub_tenant_slug_retired;"


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor in ("postgresql", "sqlite"):
        schema_editor.execute(POSTGRESQL if vendor == "postgresql" else SQLITE, params=None)


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor in ("postgresql", "sqlite"):
        schema_editor.execute(POSTGRESQL_DROP if vendor == "postgresql" else SQLITE_DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0031_retire_orphaned_tenant_slugs")]

    operations = [migrations.RunPython(forwards, backwards)]
