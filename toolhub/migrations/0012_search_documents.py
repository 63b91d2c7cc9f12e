"""On PostgreSQL, the table the "postgres" tool-search provider indexes catalogues in (tsvector + GIN)."""

from django.db import migrations

CREATE = """
CREATE TABLE toolhub_search_document (
    catalogue char(64) NOT NULL,
    name text NOT NULL,
    category text NOT NULL DEFAULT '',
    document tsvector NOT NULL,
    built_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (catalogue, name)
);
CREATE INDEX toolhub_search_document_gin ON toolhub_search_document USING gin (document);
CREATE INDEX toolhub_search_document_built_at ON toolhub_search_document (built_at);
"""

DROP = "DROP TABLE IF EXISTS toolhub_search_document;"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0011_toolcall_suspension")]

    operations = [migrations.RunPython(forwards, backwards)]
