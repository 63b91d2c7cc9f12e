"""On PostgreSQL, the functions the audit and identity triggers run resolve names in their own schema only.

A function without its own ``search_path`` resolves the tables it names through the caller's, where ``pg_temp``
comes first: the application role (PUBLIC may create temporary tables) shadowed ``toolhub_auditcheckpoint`` with a
temporary table, and the numbering trigger of 0028 read its ``max(seq)`` there, letting a checkpoint be numbered
at the end of ``bigint``. Each function now searches the schema it was created in, then ``pg_temp`` last.
"""

from django.db import migrations

FUNCTIONS = (
    "toolhub_audit_refuse()",
    "toolhub_audit_refuse_change()",
    "toolhub_audit_head_refuse_back()",
    "toolhub_audit_checkpoint_numbered()",
    "toolhub_tenant_refuse_slug_change()",
    "toolhub_toolgroup_refuse_rename()",
)


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        schema = connection.ops.quote_name(cursor.fetchone()[0])
    for function in FUNCTIONS:
        schema_editor.execute(f"ALTER FUNCTION {function} SET search_path = {schema}, pg_temp", params=None)


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        for function in FUNCTIONS:
            schema_editor.execute(f"ALTER FUNCTION {function} RESET search_path", params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0031_retire_orphaned_tenant_slugs")]

    operations = [migrations.RunPython(forwards, backwards)]
