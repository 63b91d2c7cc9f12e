"""Review 2026-12-06 (bi): ``db_app_roles_refresh`` picked its roles by their default privileges alone.

Findings (fail on b458c24, pass after the fix):

1. A role a DBA set up outside toolhub with SELECT, INSERT, UPDATE, DELETE as default privileges in the schema
   (an ETL writer) was taken for toolhub's application role: every ``migrate`` granted it CONNECT and data rights
   on every existing table, also those the DBA had withheld from it. toolhub now recognises its roles by a mark
   ``toolhub_db_roles`` sets (``COMMENT ON ROLE ... IS 'toolhub application role (toolhub_db_roles)'``) and only
   grants to marked roles that hold the defaults in this schema; any other role holding more than append-only
   rights on an audit table (PUBLIC too) is narrowed to what it held of append-only (never widened).
2. Same cause, a role set up by an earlier toolhub (no mark yet): it is no longer widened on the tables a DBA
   withheld, but its rights on an audit table a migration re-created (full, from the defaults) are still narrowed
   to append-only at once; rerunning ``toolhub_db_roles`` marks it and the next ``migrate`` grants it again.

Checked and holds:
- the refresh is idempotent (twice: same roles, same rights) and a no-op when no role is marked (nothing granted);
- a marked role's re-created audit table (review ao's test) is still append-only after ``migrate``;
- the mark is a role comment: only a superuser or a role with CREATEROLE may set it (PostgreSQL 15: "must have
  CREATEROLE privilege", on itself too), so neither the application role (NOCREATEROLE) nor a DBA's role can mark
  a role for the next ``migrate`` to widen;
- a grant passed on with a grant option (owner -> lead WITH GRANT OPTION -> ETL) is narrowed too: the refresh
  revokes from every grantee with CASCADE (checked by hand on PostgreSQL 15);
- grants on dropped audit-table columns (kept in ``pg_attribute``, possibly naming dropped roles) are skipped;
- nothing toolhub relies on is lost by narrowing: the audit triggers refuse UPDATE, DELETE and TRUNCATE anyway;
- the integration tests' workers run as a role ``toolhub_db_roles`` made, so marked (integration/test_audit_role.py).
"""

import uuid
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection

from toolhub.dbroles import db_app_roles_refresh

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

#: What ``toolhub_db_roles`` writes as the role's comment (``toolhub.dbroles.APP_ROLE_MARK``).
MARK = "toolhub application role (toolhub_db_roles)"
PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


def _privileges(role: str, table: str) -> set[str]:
    with connection.cursor() as cursor:
        found = set()
        for privilege in PRIVILEGES:
            cursor.execute("SELECT has_table_privilege(%s, %s, %s)", [role, table, privilege])
            if cursor.fetchone()[0]:
                found.add(privilege)
    return found


def _connect_granted(role: str) -> bool:
    """Whether the database's ACL names the role itself (PUBLIC's CONNECT does not count)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_database d CROSS JOIN LATERAL aclexplode(d.datacl) a "
            "WHERE d.datname = current_database() AND a.grantee = to_regrole(%s))",
            [role],
        )
        return bool(cursor.fetchone()[0])


def _run(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _drop_role(role: str) -> None:
    _run(f"DROP OWNED BY {role}", f"DROP ROLE {role}")


@pytest.fixture
def etl_writer(transactional_db: None) -> Iterator[str]:
    """A role a DBA set up outside toolhub: data defaults in the schema, rights on one table only."""
    assert connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL"
    role = f"etl_writer_{uuid.uuid4().hex[:12]}"
    _run(
        f"CREATE ROLE {role} NOLOGIN",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
        f"GRANT SELECT ON toolhub_tenant TO {role}",
    )
    try:
        yield role
    finally:
        _drop_role(role)


@pytest.fixture
def legacy_app_role(transactional_db: None) -> Iterator[str]:
    """A role an earlier toolhub set up: the command's rights and defaults, but no mark."""
    assert connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL"
    role = f"toolhub_app_{uuid.uuid4().hex[:12]}"
    call_command("toolhub_db_roles", "--role", role, stdout=None)
    _run(f"COMMENT ON ROLE {role} IS NULL")
    try:
        yield role
    finally:
        _drop_role(role)


def test_a_migrate_leaves_a_foreign_role_with_the_same_defaults_as_the_dba_set_it(etl_writer: str) -> None:
    """Found: an ETL role with SELECT, INSERT, UPDATE, DELETE as default privileges in the schema got CONNECT and
    data rights on every table at each ``migrate``, also on ``toolhub_toolcall`` which the DBA had withheld.
    Expect: its rights stay as the DBA set them (SELECT on ``toolhub_tenant``, nothing on the tool calls, no
    CONNECT of its own); an audit table it could delete from is narrowed to what it held of append-only."""
    _run(
        f"GRANT SELECT, DELETE, TRUNCATE ON toolhub_auditevent TO {etl_writer}",
        "GRANT UPDATE ON toolhub_auditcheckpoint TO PUBLIC",
    )

    call_command("migrate", verbosity=0)

    assert _privileges(etl_writer, "toolhub_toolcall") == set()
    assert _privileges(etl_writer, "toolhub_tenant") == {"SELECT"}
    assert not _connect_granted(etl_writer)
    assert _privileges(etl_writer, "toolhub_auditevent") == {"SELECT"}
    assert _privileges(etl_writer, "toolhub_auditchainhead") == set()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.privilege_type FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a "
            "WHERE c.oid = 'toolhub_auditcheckpoint'::regclass AND a.grantee = 0"
        )
        assert cursor.fetchall() == [], "PUBLIC is narrowed too"


def test_an_unmarked_role_of_an_earlier_toolhub_is_narrowed_not_widened_until_the_command_marks_it(
    legacy_app_role: str,
) -> None:
    """Found: a role an earlier toolhub set up (no mark) was widened by ``migrate`` like any role with the defaults.
    Expect: ``migrate`` narrows an audit table it got full rights on (a re-created table: its defaults) to append-only
    and leaves a table the DBA withheld alone; ``toolhub_db_roles`` marks it, then ``migrate`` grants it again."""
    role = legacy_app_role
    _run(
        f"REVOKE ALL ON toolhub_toolcall FROM {role}",
        f"GRANT ALL ON toolhub_auditverification TO {role}",  # as the defaults give a re-created audit table
        f"GRANT ALL ON toolhub_auditchainhead TO {role}",
    )

    call_command("migrate", verbosity=0)

    assert _privileges(role, "toolhub_auditverification") == {"SELECT", "INSERT"}
    assert _privileges(role, "toolhub_auditchainhead") == {"SELECT", "INSERT"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT has_column_privilege(%s, 'toolhub_auditchainhead', 'seq', 'UPDATE')", [role])
        assert cursor.fetchone()[0], "narrowing keeps the chain head's columns an append moves"
        cursor.execute("SELECT has_column_privilege(%s, 'toolhub_auditchainhead', 'chain', 'UPDATE')", [role])
        assert not cursor.fetchone()[0]
    assert _privileges(role, "toolhub_toolcall") == set()
    assert role not in db_app_roles_refresh()

    call_command("toolhub_db_roles", "--role", role, stdout=None)
    with connection.cursor() as cursor:
        cursor.execute("SELECT shobj_description(to_regrole(%s), 'pg_authid')", [role])
        assert cursor.fetchone()[0] == MARK
    _run(f"REVOKE ALL ON toolhub_toolcall FROM {role}")
    call_command("migrate", verbosity=0)

    assert _privileges(role, "toolhub_toolcall") == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    assert _privileges(role, "toolhub_auditverification") == {"SELECT", "INSERT"}
    first = db_app_roles_refresh()
    assert role in first and db_app_roles_refresh() == first
    assert _privileges(role, "toolhub_auditevent") == {"SELECT", "INSERT"}


def test_neither_the_app_role_nor_a_foreign_role_can_set_the_mark(etl_writer: str, legacy_app_role: str) -> None:
    """Found: nothing (holds): the mark is a role comment, which needs CREATEROLE (or a superuser) to set.
    Expect: the application role (NOCREATEROLE) cannot mark the ETL role, nor the ETL role itself, so neither can
    make the next ``migrate`` widen it; the ETL role is still not granted anything by the refresh."""
    from django.db import DatabaseError, transaction

    for acting, target in ((legacy_app_role, etl_writer), (legacy_app_role, legacy_app_role), (etl_writer, etl_writer)):
        with pytest.raises(DatabaseError) as refused, transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL ROLE {acting}")
            cursor.execute(f"COMMENT ON ROLE {target} IS %s", [MARK])
        assert "must have CREATEROLE privilege" in str(refused.value)
    assert etl_writer not in db_app_roles_refresh()
    assert _privileges(etl_writer, "toolhub_toolcall") == set()
