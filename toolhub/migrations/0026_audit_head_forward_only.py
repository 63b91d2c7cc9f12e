"""On PostgreSQL, a chain head moves forward on its own chain only: UPDATE may not change ``chain`` or lower ``seq``.

Migration 0007 refuses DELETE of a head; an UPDATE of its key (``chain``) removed it as surely, and a ``seq``
set back rewound it. The trigger fires its function only for such a change (its WHEN clause), so an append,
which adds to ``seq`` (or rewrites ``hash`` at the same ``seq``, off the one-statement path), costs no call.
The application's role is also granted UPDATE of ``seq``, ``hash`` and ``previous_hash`` only
(``toolhub.dbroles``); the owner could still disable the trigger, as any other.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION toolhub_audit_head_refuse_back() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'toolhub_auditchainhead: a chain head moves forward on its own chain only: UPDATE of chain % '
        '(seq %) to chain % (seq %) refused', OLD.chain, OLD.seq, NEW.chain, NEW.seq
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER toolhub_audit_head_forward
    BEFORE UPDATE ON toolhub_auditchainhead
    FOR EACH ROW WHEN (NEW.chain IS DISTINCT FROM OLD.chain OR NEW.seq < OLD.seq)
    EXECUTE FUNCTION toolhub_audit_head_refuse_back();
"""

DROP = """
DROP TRIGGER IF EXISTS toolhub_audit_head_forward ON toolhub_auditchainhead;
DROP FUNCTION IF EXISTS toolhub_audit_head_refuse_back();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0025_remote_mcp_credential_scheme_token")]

    operations = [migrations.RunPython(forwards, backwards)]
