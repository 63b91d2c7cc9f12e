"""On PostgreSQL, a stored checkpoint is numbered after the newest one, never far beyond it.

Whoever may insert checkpoints (the application's role, for beat) could number one 9223372036854775807, the
largest ``bigint``: every later checkpoint, the acknowledgement's too, would be numbered past it and fail, and
none could be signed again until the owner deleted the row. A trigger refuses a checkpoint numbered at or
below the newest stored one (nor may it fill a gap a deleted checkpoint left) or more than ``MAX_JUMP``
beyond it. Beat numbers ``newest + 1``, or after the newest file of ``AUDIT_CHECKPOINT_DIR`` when copies go
beyond the stored checkpoints (a restored database): so a jump is allowed, but bounded; pushing the
numbering to the end of ``bigint`` would take 2^63 / ``MAX_JUMP`` (about 9 * 10^12) inserts.
"""

from django.db import migrations

#: The furthest beyond the newest stored checkpoint the next may be numbered: at the default interval (300 s),
#: copies made over more than nine years.
MAX_JUMP = 1_000_000

CREATE = f"""
CREATE OR REPLACE FUNCTION toolhub_audit_checkpoint_numbered() RETURNS trigger AS $$
DECLARE
    newest bigint;
BEGIN
    SELECT coalesce(max(seq), 0) INTO newest FROM toolhub_auditcheckpoint;
    IF NEW.seq <= newest OR NEW.seq > newest + {MAX_JUMP} THEN
        RAISE EXCEPTION 'toolhub_auditcheckpoint: checkpoint #% refused: a checkpoint is numbered after the '
            'newest stored one (#%), at most {MAX_JUMP:,} beyond it', NEW.seq, newest
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER toolhub_audit_checkpoint_numbered
    BEFORE INSERT ON toolhub_auditcheckpoint
    FOR EACH ROW EXECUTE FUNCTION toolhub_audit_checkpoint_numbered();
"""

DROP = """
DROP TRIGGER IF EXISTS toolhub_audit_checkpoint_numbered ON toolhub_auditcheckpoint;
DROP FUNCTION IF EXISTS toolhub_audit_checkpoint_numbered();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0027_audit_verification_append_only")]

    operations = [migrations.RunPython(forwards, backwards)]
