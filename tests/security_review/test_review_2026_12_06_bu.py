"""Review 2026-12-06 (bu): review of the database-role hardening (``toolhub.dbroles``, reviews ao, bi, bo).

Findings (fail on 864332f, pass after the fix):

1. Rights the application role gets through a role it is a member of were neither refused nor reported:
   ``toolhub_db_roles`` marked a role that, as a member of another role (``GRANT etl_writer TO toolhub_app``,
   ``pg_write_all_data``, a NOINHERIT membership it may ``SET ROLE`` to), could DELETE verification records, UPDATE
   a chain head's ``chain`` or add a TRIGGER to the audit events (one that drops what is appended); and ``migrate``
   kept granting to such a role: its narrowing revokes grants on the audit tables, never a membership (nor a
   predefined role's rights). The command now refuses such a role (naming the rights and the roles lending them,
   leaving the role as it was), and a system check (``toolhub.W008``, with ``--database`` and on ``migrate``)
   names a marked role that became such a member afterwards.
2. Nothing told the operator that a role set up by a toolhub before the mark (review bi) is no longer refreshed by
   ``migrate`` until the command is rerun: only the README did. A system check (``toolhub.W009``) now names each
   login role holding the command's table and sequence default privileges without the mark, with the command to
   run (a DBA's NOLOGIN group or an ETL role with the table defaults only is not named).

Checked and holds:
- every table with an audit trigger (``toolhub_audit_*``: append-only, no truncate) is in
  ``APPEND_ONLY_PRIVILEGES``, so a later migration's audit table is narrowed by ``migrate`` only once listed there
  (this test fails when one is added without it);
- the role the command makes holds no TRUNCATE, REFERENCES or TRIGGER on any table of the schema, no UPDATE on a
  sequence (no ``setval``), and its default privileges for future tables and sequences are the data rights and
  USAGE/SELECT only; it owns nothing (no ALTER, no ``DISABLE TRIGGER``, no row security to switch); a marked role
  with no membership is not named by the check;
- the audit triggers refuse UPDATE/DELETE/TRUNCATE for any role, so finding 1's DELETE and UPDATE were held back
  by the triggers; its TRIGGER right was not;
- row-level security: the command refuses a BYPASSRLS role; the audit tables have no policies (none to bypass).
"""

import uuid

import pytest
from django.core.checks import CheckMessage, run_checks
from django.core.management import CommandError, call_command
from django.db import connection

from toolhub.dbroles import APP_ROLE_MARK, APPEND_ONLY_PRIVILEGES, db_app_roles_refresh

pytestmark = pytest.mark.postgres


def _run(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _one(sql: str, params: list[object]) -> object:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def _role(prefix: str) -> str:
    """A role name of this review (``bu_``); roles made in the test's transaction vanish with it."""
    assert connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL"
    return f"bu_{prefix}_{uuid.uuid4().hex[:10]}"


def _checked(check_id: str) -> list[CheckMessage]:
    """What ``manage.py check --database default`` (and ``migrate``) reports under ``check_id``."""
    return [found for found in run_checks(databases=["default"]) if found.id == check_id]


def _warnings(check_id: str) -> list[str]:
    return [str(found.msg) for found in _checked(check_id)]


LENDERS = {
    "trigger on the audit events": ("GRANT TRIGGER ON toolhub_auditevent TO {lender}", "TRIGGER on toolhub_auditevent"),
    "delete of verifications": (
        "GRANT DELETE ON toolhub_auditverification TO {lender}",
        "DELETE on toolhub_auditverif",
    ),
    "update of a head's chain": (
        "GRANT UPDATE (chain) ON toolhub_auditchainhead TO {lender}",
        "UPDATE on toolhub_auditc",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("inherit", ["INHERIT", "NOINHERIT"])
@pytest.mark.parametrize("lent", list(LENDERS))
def test_the_command_refuses_a_role_that_may_change_the_trail_as_a_member_of_another(lent: str, inherit: str) -> None:
    """Found: ``toolhub_db_roles`` marked a role that, as a member of another role, could add a trigger to the audit
    events, delete verification records or move a chain head's key (also a NOINHERIT member: ``SET ROLE``).
    Expect: refused, naming the right, the table and the lending role with the REVOKE to run; the role unmarked."""
    role, lender = _role("app"), _role("lender")
    grant, named = LENDERS[lent]
    _run(f"CREATE ROLE {lender} NOLOGIN", grant.format(lender=lender), f"CREATE ROLE {role} LOGIN {inherit}")
    _run(f"GRANT {lender} TO {role}")

    with pytest.raises(CommandError) as refused:
        call_command("toolhub_db_roles", "--role", role, stdout=None)

    assert named in str(refused.value)
    assert f"as a member of {lender} (REVOKE {lender} FROM {role}" in str(refused.value)
    assert _one("SELECT shobj_description(to_regrole(%s), 'pg_authid')", [role]) is None
    assert role not in db_app_roles_refresh()


@pytest.mark.django_db
def test_a_membership_granted_after_the_command_is_reported_and_not_taken_for_narrowed() -> None:
    """Found: a marked role later made a member of ``pg_write_all_data`` (or of a role with rights on the trail) kept
    being granted by every ``migrate``, silently: narrowing revokes grants on the audit tables, not memberships.
    Expect: the check ``toolhub.W008`` names the role, what it may do and through which role; without the
    membership it names nothing of it."""
    role = _role("app")
    call_command("toolhub_db_roles", "--role", role, stdout=None)
    assert not [message for message in _warnings("toolhub.W008") if repr(role) in message]

    _run(f"GRANT pg_write_all_data TO {role}")
    assert role in db_app_roles_refresh()
    assert _one("SELECT has_table_privilege(%s, 'toolhub_auditverification', 'DELETE')", [role])

    (message,) = [message for message in _warnings("toolhub.W008") if repr(role) in message]
    assert "DELETE, UPDATE on toolhub_auditchainhead" in message
    assert f"as a member of pg_write_all_data (REVOKE pg_write_all_data FROM {role}" in message


@pytest.mark.django_db
def test_a_role_an_earlier_toolhub_set_up_without_the_mark_is_named_until_the_command_marks_it() -> None:
    """Found: nothing told the operator that an unmarked role of an earlier toolhub is no longer refreshed by
    ``migrate`` (only the README).
    Expect: ``toolhub.W009`` names it with the command to run; a DBA's NOLOGIN role holding the table defaults is
    not named; once the command marks the role, it is not named either."""
    legacy, etl = _role("legacy"), _role("etl")
    call_command("toolhub_db_roles", "--role", legacy, stdout=None)
    _run(
        f"COMMENT ON ROLE {legacy} IS NULL",
        f"CREATE ROLE {etl} NOLOGIN",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {etl}",
    )

    named = [message for message in _warnings("toolhub.W009") if legacy in message or etl in message]
    assert len(named) == 1 and f"Role {legacy!r} was set up by an earlier toolhub_db_roles" in named[0]
    (hint,) = [found.hint for found in _checked("toolhub.W009") if legacy in str(found.msg)]
    assert f"manage.py toolhub_db_roles --role {legacy}" in str(hint)

    call_command("toolhub_db_roles", "--role", legacy, stdout=None)
    assert not [message for message in _warnings("toolhub.W009") if legacy in message]
    _run(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM {etl}")


@pytest.mark.django_db
def test_every_audit_table_is_append_only_and_the_role_holds_nothing_past_the_data_rights() -> None:
    """Found: nothing (holds).
    Expect: the audit-triggered tables are exactly ``APPEND_ONLY_PRIVILEGES``; the command's role has no TRUNCATE,
    REFERENCES or TRIGGER on any table, no UPDATE on a sequence, owns nothing, and its defaults are the data rights."""
    role = _role("app")
    call_command("toolhub_db_roles", "--role", role, stdout=None)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND t.tgname LIKE 'toolhub\\_audit\\_%%' ORDER BY 1"
        )
        assert [table for (table,) in cursor.fetchall()] == sorted(APPEND_ONLY_PRIVILEGES)
        cursor.execute(
            "SELECT c.relname, p FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "CROSS JOIN unnest(ARRAY['TRUNCATE', 'REFERENCES', 'TRIGGER']) p WHERE n.nspname = current_schema() "
            "AND c.relkind IN ('r', 'p') AND has_table_privilege(%s, c.oid, p)",
            [role],
        )
        assert cursor.fetchall() == []
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() "
            "AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(%s, c.oid, 'UPDATE') END",
            [role],
        )
        assert cursor.fetchall() == []
        cursor.execute("SELECT count(*) FROM pg_class WHERE relowner = to_regrole(%s)", [role])
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT d.defaclobjtype, array_agg(a.privilege_type ORDER BY a.privilege_type) FROM pg_default_acl d "
            "CROSS JOIN LATERAL aclexplode(d.defaclacl) a WHERE a.grantee = to_regrole(%s) GROUP BY 1 ORDER BY 1",
            [role],
        )
        assert cursor.fetchall() == [("S", ["SELECT", "USAGE"]), ("r", ["DELETE", "INSERT", "SELECT", "UPDATE"])]
        cursor.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relname = ANY(%s) AND (c.relrowsecurity OR EXISTS "
            "(SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid))",
            [list(APPEND_ONLY_PRIVILEGES)],
        )
        assert cursor.fetchall() == []
    assert _one("SELECT shobj_description(to_regrole(%s), 'pg_authid')", [role]) == APP_ROLE_MARK
    assert not [message for message in _warnings("toolhub.W008") if repr(role) in message]
