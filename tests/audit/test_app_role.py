"""The application's database role: it appends to the audit trail and can do nothing else to it."""

import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from tests.audit.conftest import acknowledge_checkpoint, append_events, owner_tampering
from tests.helpers import RequestCall, assert_audit_intact
from toolhub.checkpoints import CheckpointRefusedError, audit_checkpoint_create
from toolhub.dbroles import APPEND_ONLY_PRIVILEGES
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent, AuditVerification, CallStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
ActAs = Callable[[str], AbstractContextManager[None]]


@pytest.fixture(autouse=True)
def _postgres_only(db: None) -> None:
    """Roles and triggers exist on PostgreSQL only (outside CI, the collection hook skips these tests there)."""
    if connection.vendor != "postgresql":
        pytest.fail("database roles and audit triggers need DATABASE_URL pointing at PostgreSQL (use `make test`)")


def _refused(sql: str, params: list | None = None) -> str:
    """Run one statement that must fail; return the database's message (the transaction goes on)."""
    with pytest.raises(DatabaseError) as excinfo, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(excinfo.value)


def _privileges(role: str, table: str) -> set[str]:
    with connection.cursor() as cursor:
        found = set()
        for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"):
            cursor.execute("SELECT has_table_privilege(%s, %s, %s)", [role, table, privilege])
            if cursor.fetchone()[0]:
                found.add(privilege)
    return found


def test_the_app_role_cannot_update_delete_or_truncate_audit_events(app_role: str, as_role: ActAs) -> None:
    events = append_events(3)

    with as_role(app_role):
        update = _refused("UPDATE toolhub_auditevent SET actor = 'mallory' WHERE id = %s", [events[0].pk])
        delete = _refused("DELETE FROM toolhub_auditevent WHERE id = %s", [events[2].pk])
        truncate = _refused("TRUNCATE toolhub_auditevent")

    for message in (update, delete, truncate):
        assert "permission denied for table toolhub_auditevent" in message
    assert list(AuditEvent.objects.order_by("seq").values_list("actor", flat=True)) == ["tester"] * 3
    assert_audit_intact()


def test_the_app_role_cannot_disable_the_audit_triggers_or_alter_the_tables(app_role: str, as_role: ActAs) -> None:
    with as_role(app_role):
        disable = _refused("ALTER TABLE toolhub_auditevent DISABLE TRIGGER toolhub_audit_append_only")
        disable_all = _refused("ALTER TABLE toolhub_auditcheckpoint DISABLE TRIGGER ALL")
        drop = _refused("DROP TRIGGER toolhub_audit_no_truncate ON toolhub_auditevent")
        replica = _refused("SET session_replication_role = replica")

    assert "must be owner of table toolhub_auditevent" in disable
    assert "must be owner of table toolhub_auditcheckpoint" in disable_all
    assert "must be owner of" in drop
    assert "permission denied to set parameter" in replica
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgenabled FROM pg_trigger WHERE tgname = 'toolhub_audit_append_only' "
            "AND tgrelid = 'toolhub_auditevent'::regclass"
        )
        assert cursor.fetchone()[0] == "O"  # still enabled


def test_the_app_role_cannot_change_or_remove_checkpoints_or_chain_heads(
    app_role: str, as_role: ActAs, audit_key: str
) -> None:
    append_events(2)
    checkpoint = audit_checkpoint_create()

    with as_role(app_role):
        messages = [
            _refused("UPDATE toolhub_auditcheckpoint SET body = '{}'"),
            _refused("DELETE FROM toolhub_auditcheckpoint"),
            _refused("TRUNCATE toolhub_auditcheckpoint"),
            _refused("DELETE FROM toolhub_auditchainhead"),
            _refused("TRUNCATE toolhub_auditchainhead"),
        ]

    assert all("permission denied for table" in message for message in messages)
    assert AuditCheckpoint.objects.get().signature == checkpoint["signature"]
    assert AuditChainHead.objects.count() == 1


def test_the_app_role_cannot_move_a_chain_head_off_its_chain_or_back(app_role: str, as_role: ActAs) -> None:
    events = append_events(3)
    chain = events[0].chain

    with as_role(app_role):
        renamed = _refused("UPDATE toolhub_auditchainhead SET chain = chain + 1 WHERE chain = %s", [chain])
        rewound = _refused(
            "UPDATE toolhub_auditchainhead SET seq = 1, hash = %s WHERE chain = %s", [events[0].hash, chain]
        )

    assert "permission denied for table toolhub_auditchainhead" in renamed
    assert "a chain head moves forward on its own chain only" in rewound
    assert AuditChainHead.objects.get(chain=chain).seq == 3
    assert_audit_intact()


def test_the_owner_cannot_move_a_chain_head_off_its_chain_or_back_either() -> None:
    events = append_events(2)
    chain = events[0].chain

    renamed = _refused("UPDATE toolhub_auditchainhead SET chain = %s, seq = 0 WHERE chain = %s", [2**62 + 7, chain])
    rewound = _refused("UPDATE toolhub_auditchainhead SET seq = seq - 1 WHERE chain = %s", [chain])

    assert f"UPDATE of chain {chain} (seq 2) to chain {2**62 + 7} (seq 0) refused" in renamed
    assert f"UPDATE of chain {chain} (seq 2) to chain {chain} (seq 1) refused" in rewound
    with connection.cursor() as cursor:  # forward on its own chain, or in place, is what an append does
        cursor.execute("UPDATE toolhub_auditchainhead SET hash = hash WHERE chain = %s", [chain])
    assert AuditChainHead.objects.get(chain=chain).seq == 2
    assert_audit_intact()


def _verification(ok: bool) -> AuditVerification:
    now = timezone.now()
    return AuditVerification.objects.create(
        started_at=now, finished_at=now, events_checked=3, ok=ok, problems="" if ok else "chain 7: event #3 altered"
    )


def test_the_app_role_records_verifications_but_cannot_rewrite_or_remove_them(app_role: str, as_role: ActAs) -> None:
    failed = _verification(ok=False)

    with as_role(app_role):
        call_command("verify_audit", "--no-progress", "--workers", "1", stdout=StringIO())  # the run is recorded
        messages = [
            _refused("UPDATE toolhub_auditverification SET ok = true, problems = '' WHERE id = %s", [failed.pk]),
            _refused("DELETE FROM toolhub_auditverification WHERE id = %s", [failed.pk]),
            _refused("TRUNCATE toolhub_auditverification"),
        ]

    assert all("permission denied for table toolhub_auditverification" in message for message in messages)
    failed.refresh_from_db()
    assert (failed.ok, failed.problems) == (False, "chain 7: event #3 altered")
    assert AuditVerification.objects.filter(ok=True).count() == 1


def test_the_owner_cannot_rewrite_or_remove_verifications_either() -> None:
    failed = _verification(ok=False)

    update = _refused("UPDATE toolhub_auditverification SET ok = true WHERE id = %s", [failed.pk])
    delete = _refused("DELETE FROM toolhub_auditverification")
    truncate = _refused("TRUNCATE toolhub_auditverification")

    assert "toolhub_auditverification is append-only: UPDATE refused" in update
    assert "toolhub_auditverification is append-only: DELETE refused" in delete
    assert "toolhub_auditverification is append-only: TRUNCATE refused" in truncate
    assert AuditVerification.objects.get().ok is False


_PLANT = (
    "INSERT INTO toolhub_auditcheckpoint (seq, created_at, body, signature, acknowledged) "
    "VALUES (%s, now(), '{}', 'not-signed', false)"
)


def test_checkpoints_are_numbered_after_the_newest_never_far_beyond_it_nor_into_a_gap(
    app_role: str, as_role: ActAs, audit_key: str
) -> None:
    append_events(2)
    audit_checkpoint_create()  # #1

    with as_role(app_role):
        last = _refused(_PLANT, [2**63 - 1])
        far = _refused(_PLANT, [1 + 1_000_001])
        again = _refused(_PLANT, [1])
    with owner_tampering():  # a gap the owner left (checkpoint #2 deleted) is not filled either
        audit_checkpoint_create()
        audit_checkpoint_create()
        AuditCheckpoint.objects.filter(seq=2).delete()
    gap = _refused(_PLANT, [2])

    assert (
        "checkpoint #9223372036854775807 refused: a checkpoint is numbered after the newest stored one (#1), "
        "at most 1,000,000 beyond it" in last
    )
    assert "checkpoint #1000002 refused" in far
    assert "checkpoint #1 refused" in again
    assert "checkpoint #2 refused: a checkpoint is numbered after the newest stored one (#3)" in gap
    assert list(AuditCheckpoint.objects.values_list("seq", flat=True)) == [1, 3]


def test_after_a_forged_checkpoint_the_acknowledgement_still_signs_the_next_one(
    app_role: str, as_role: ActAs, audit_key: str
) -> None:
    # given the application's role planting an unsigned checkpoint, as far ahead as it may
    append_events(2)
    audit_checkpoint_create()
    with as_role(app_role), connection.cursor() as cursor:
        cursor.execute(_PLANT, [1 + 1_000_000])

    # then beat refuses to sign over it, and the acknowledgement signs the next number
    with pytest.raises(CheckpointRefusedError, match="stored checkpoint #1000001: signature does not match"):
        audit_checkpoint_create()
    with as_role(app_role):
        acknowledge_checkpoint("a forged checkpoint was planted (incident 7)")
        audit_checkpoint_create()  # and beat goes on

    assert list(AuditCheckpoint.objects.values_list("seq", "acknowledged")) == [
        (1, False),
        (1_000_001, False),
        (1_000_002, True),
        (1_000_003, False),
    ]
    out = StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", stdout=out)
    assert "matches stored checkpoint #1000003" in out.getvalue()


def test_the_app_role_appends_correctly_chained_events_and_checkpoints(
    app_role: str, as_role: ActAs, audit_key: str
) -> None:
    # given events appended by the owner
    first = append_events(2)

    # when the application role appends to the same chain and stores a checkpoint
    with as_role(app_role):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == app_role
        more = append_events(3, key=first[0].call_id)
        checkpoint = audit_checkpoint_create()

    # then the chain continues, verifies, and matches the checkpoint
    assert [event.seq for event in more] == [3, 4, 5]
    assert more[0].prev_hash == first[-1].hash
    assert checkpoint["seq"] == 1
    assert checkpoint["heads"][str(first[0].chain)] == {"seq": 5, "hash": more[-1].hash}
    out = StringIO()
    call_command("verify_audit", "--no-progress", stdout=out)
    assert "Audit trail verified: 5 events, every chain intact and matches stored checkpoint #1" in out.getvalue()


def test_the_app_role_runs_a_governed_call_end_to_end(app_role: str, as_role: ActAs, request_call: RequestCall) -> None:
    with as_role(app_role):
        call = request_call("record_effect", {"note": "as the application"})

    assert call.status == CallStatus.SUCCEEDED
    assert AuditEvent.objects.filter(call_id=call.id).count() >= 3
    assert assert_audit_intact() >= 3


def test_the_owner_cannot_truncate_the_audit_tables_either() -> None:
    append_events(2)

    messages = {table: _refused(f"TRUNCATE {table}") for table in ("toolhub_auditevent", "toolhub_auditchainhead")}
    messages["toolhub_auditcheckpoint"] = _refused("TRUNCATE toolhub_auditcheckpoint")
    cascade = _refused("TRUNCATE toolhub_toolcall, toolhub_auditevent CASCADE")

    for table, message in messages.items():
        assert f"{table} is append-only: TRUNCATE refused" in message
    assert "toolhub_auditevent is append-only: TRUNCATE refused" in cascade
    assert AuditEvent.objects.count() == 2
    assert_audit_intact()


def test_the_owner_cannot_change_checkpoints_or_delete_chain_heads(audit_key: str) -> None:
    append_events(1)
    audit_checkpoint_create()

    update = _refused("UPDATE toolhub_auditcheckpoint SET signature = 'x'")
    delete = _refused("DELETE FROM toolhub_auditcheckpoint")
    head = _refused("DELETE FROM toolhub_auditchainhead")

    assert "toolhub_auditcheckpoint is append-only: UPDATE refused" in update
    assert "toolhub_auditcheckpoint is append-only: DELETE refused" in delete
    assert "toolhub_auditchainhead is append-only: DELETE refused" in head
    assert AuditCheckpoint.objects.count() == 1
    assert AuditChainHead.objects.count() == 1


def _updatable_columns(role: str, table: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
            "AND has_column_privilege(%s, attrelid, attnum, 'UPDATE')",
            [table, role],
        )
        return {name for (name,) in cursor.fetchall()}


def test_the_command_grants_read_write_everywhere_but_only_appending_on_the_audit_trail(app_role: str) -> None:
    assert _privileges(app_role, "toolhub_auditevent") == {"SELECT", "INSERT"}
    assert _privileges(app_role, "toolhub_auditcheckpoint") == {"SELECT", "INSERT"}
    assert _privileges(app_role, "toolhub_auditverification") == {"SELECT", "INSERT"}
    # a chain head: UPDATE of what an append moves, never of its key
    assert _privileges(app_role, "toolhub_auditchainhead") == {"SELECT", "INSERT"}
    assert _updatable_columns(app_role, "toolhub_auditchainhead") == {"seq", "hash", "previous_hash"}
    assert _updatable_columns(app_role, "toolhub_auditevent") == set()
    for table in ("toolhub_toolcall", "agents_app_agentrun", "approvals_approvalrequest", "auth_user"):
        assert _privileges(app_role, table) == {"SELECT", "INSERT", "UPDATE", "DELETE"}, table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls "
            "FROM pg_roles WHERE rolname = %s",
            [app_role],
        )
        assert cursor.fetchone() == (True, False, False, False, False, False)
        cursor.execute("SELECT pg_has_role(%s, current_user, 'MEMBER')", [app_role])
        assert cursor.fetchone()[0] is False
        cursor.execute("SELECT has_database_privilege(%s, current_database(), 'CONNECT')", [app_role])
        assert cursor.fetchone()[0] is True
        cursor.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')", [app_role])
        assert cursor.fetchone()[0] is False


def test_tables_created_by_later_migrations_are_granted_by_default(app_role: str, as_role: ActAs) -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE later_migration_table (id bigint GENERATED BY DEFAULT AS IDENTITY, note text)")

    assert _privileges(app_role, "later_migration_table") == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    with as_role(app_role), connection.cursor() as cursor:
        cursor.execute("INSERT INTO later_migration_table (note) VALUES ('x') RETURNING id")
        assert cursor.fetchone()[0] == 1


def test_the_command_is_idempotent_and_repairs_audit_privileges(app_role: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # given someone granted the application role too much on the audit trail
    with connection.cursor() as cursor:
        cursor.execute(
            f"GRANT ALL ON toolhub_auditevent, toolhub_auditcheckpoint, toolhub_auditverification TO {app_role}"
        )
    assert "TRUNCATE" in _privileges(app_role, "toolhub_auditevent")
    monkeypatch.setenv("TOOLHUB_DB_APP_PASSWORD", "s3cret-app-password")
    out = StringIO()

    # when the command runs again, with a password this time
    call_command("toolhub_db_roles", "--role", app_role, stdout=out)

    # then the role is updated, not duplicated, and holds only what appending needs
    assert f"Role {app_role} updated (password from TOOLHUB_DB_APP_PASSWORD)" in out.getvalue()
    assert _privileges(app_role, "toolhub_auditevent") == {"SELECT", "INSERT"}
    assert _privileges(app_role, "toolhub_auditcheckpoint") == {"SELECT", "INSERT"}
    assert _privileges(app_role, "toolhub_auditverification") == {"SELECT", "INSERT"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), min(rolpassword) FROM pg_authid WHERE rolname = %s", [app_role])
        count, stored = cursor.fetchone()
    assert count == 1
    assert stored.startswith("SCRAM-SHA-256$")
    assert "s3cret-app-password" not in stored


def test_the_owner_is_refused_as_the_application_role() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        owner = cursor.fetchone()[0]

    with pytest.raises(CommandError, match=f"must not be the owner '{owner}'"):
        call_command("toolhub_db_roles", "--role", owner)


def test_a_role_that_could_act_as_the_owner_is_refused() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE toolhub_app_too_strong LOGIN")
        cursor.execute("SELECT current_user")
        cursor.execute(f"GRANT {connection.ops.quote_name(cursor.fetchone()[0])} TO toolhub_app_too_strong")
        cursor.execute("CREATE ROLE toolhub_app_super LOGIN SUPERUSER")

    with pytest.raises(CommandError, match="is a member of the owner"):
        call_command("toolhub_db_roles", "--role", "toolhub_app_too_strong")
    with pytest.raises(CommandError, match="is a superuser"):
        call_command("toolhub_db_roles", "--role", "toolhub_app_super")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM information_schema.role_table_grants "
            "WHERE grantee IN ('toolhub_app_too_strong', 'toolhub_app_super')"
        )
        assert cursor.fetchone()[0] == 0  # nothing was granted


def _granted_to(*roles: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(  # an owner's own privileges on its table are not grants
            "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = ANY(%s) AND grantor <> grantee",
            [list(roles)],
        )
        return cursor.fetchone()[0]


def test_a_role_that_owns_an_audit_table_is_refused_naming_the_table() -> None:
    # given a deployment that first ran migrate as the application role: it owns the checkpoints
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE toolhub_app_owns LOGIN")
        cursor.execute("ALTER TABLE toolhub_auditcheckpoint OWNER TO toolhub_app_owns")

    with pytest.raises(CommandError, match="must not be the owner 'toolhub_app_owns' of table toolhub_auditcheckpoint"):
        call_command("toolhub_db_roles", "--role", "toolhub_app_owns")

    assert _granted_to("toolhub_app_owns") == 0  # nothing was granted


def test_a_role_in_the_owner_of_a_trigger_function_or_of_the_schema_is_refused() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE toolhub_fn_owner NOLOGIN")
        cursor.execute("ALTER FUNCTION toolhub_audit_refuse() OWNER TO toolhub_fn_owner")
        cursor.execute("CREATE ROLE toolhub_app_in_fn LOGIN IN ROLE toolhub_fn_owner")
        cursor.execute("CREATE ROLE toolhub_app_schema LOGIN")
        cursor.execute("ALTER SCHEMA public OWNER TO toolhub_app_schema")

    # the owner of a trigger function could replace its body with one that lets everything through
    with pytest.raises(
        CommandError,
        match=r"is a member of the owner 'toolhub_fn_owner' of function toolhub_audit_refuse\(\) \(a trigger of",
    ):
        call_command("toolhub_db_roles", "--role", "toolhub_app_in_fn")
    # the owner of the schema could drop the audit tables
    with pytest.raises(CommandError, match="must not be the owner 'toolhub_app_schema' of schema public"):
        call_command("toolhub_db_roles", "--role", "toolhub_app_schema")
    assert _granted_to("toolhub_app_in_fn", "toolhub_app_schema") == 0


def test_default_privileges_are_those_of_the_audit_tables_owner_not_of_who_runs_the_command() -> None:
    # given tables owned by a dedicated owner role, and the command run by a superuser (as DBAs do)
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE toolhub_tables_owner NOLOGIN")
        for table in APPEND_ONLY_PRIVILEGES:
            cursor.execute(f"ALTER TABLE {table} OWNER TO toolhub_tables_owner")
    out = StringIO()

    call_command("toolhub_db_roles", "--role", "toolhub_app_defaults", stdout=out)

    assert "owned by toolhub_tables_owner:" in out.getvalue()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_userbyid(defaclrole), defaclobjtype FROM pg_default_acl "
            "WHERE array_to_string(defaclacl, ',') LIKE %s ORDER BY 2",
            ["%toolhub_app_defaults=%"],
        )
        assert cursor.fetchall() == [("toolhub_tables_owner", "S"), ("toolhub_tables_owner", "r")]


def test_a_bad_role_name_is_refused_before_anything_runs() -> None:
    with pytest.raises(CommandError, match="is not allowed"):
        call_command("toolhub_db_roles", "--role", 'app"; DROP TABLE toolhub_auditevent; --')
    assert connection.introspection.table_names().count("toolhub_auditevent") == 1


def test_on_sqlite_the_command_explains_there_is_nothing_to_do(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "toolhub.settings",
        "DJANGO_DEBUG": "1",  # the embedded mode
        "DATABASE_URL": f"sqlite:///{tmp_path / 'embedded.sqlite3'}",
    }

    done = subprocess.run(
        [sys.executable, "manage.py", "toolhub_db_roles"], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 1
    assert "Database roles exist on PostgreSQL only" in done.stderr
    assert "nothing to do" in done.stderr
    assert not (tmp_path / "embedded.sqlite3").exists()
