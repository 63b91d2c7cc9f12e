"""The application's own PostgreSQL role: full use of the data, but only appending to the audit trail.

Migrations run as the owner of the tables. The web and worker processes connect as a second role that
is not the owner, not a member of it, and not a superuser: it cannot ALTER a table (so it cannot
disable the audit triggers), and on the audit tables it holds only what appending needs. The owner
runs ``manage.py toolhub_db_roles`` once to set the role up; it is idempotent and marks the role as
toolhub's (``APP_ROLE_MARK``, the role's comment: only who may create roles can set it, not the application
role). Every ``migrate`` afterwards (``db_app_roles_refresh``, a ``post_migrate`` handler) narrows every role's
rights on the audit tables to at most append-only, and gives each marked role set up in this schema its rights
again: a table a migration re-creates or adds as someone else would otherwise get the defaults (full data
rights on an audit table) or no rights at all. A role toolhub did not mark (a DBA's ETL role with the same
defaults, or one an earlier toolhub set up: rerun the command) is never granted anything. Narrowing cannot reach
rights lent by a role membership: the command refuses a role holding more than append-only that way, and the system
checks name a marked role made such a member later (``db_app_roles_exposed``) and an unmarked one
(``db_app_roles_unmarked``).
"""

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import DatabaseError, connections, transaction
from django.db.backends.utils import CursorWrapper

from toolhub.db_pooler import pooled, role_settings_set
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent, AuditVerification

__all__ = [
    "APPEND_ONLY_PRIVILEGES",
    "APP_ROLE_MARK",
    "DatabaseRoleError",
    "RoleReport",
    "db_app_role_ensure",
    "db_app_roles_exposed",
    "db_app_roles_refresh",
    "db_app_roles_unmarked",
]

#: The comment ``toolhub_db_roles`` sets on its role: the refresh after ``migrate`` grants to marked roles only.
APP_ROLE_MARK = "toolhub application role (toolhub_db_roles)"

# What the application role may do on each audit table: read and append. A chain's head row is
# advanced by every append (which locks it and so serializes the chain's writers): UPDATE of the columns
# an append moves only, never of its key ``chain`` (a trigger, migration 0026, refuses a seq going back).
# The record of each verification, which the console shows as the trail's proof, is only ever inserted.
_CHAIN_HEAD_COLUMNS = ("seq", "hash", "previous_hash")
APPEND_COLUMNS: dict[str, tuple[str, ...]] = {AuditChainHead._meta.db_table: _CHAIN_HEAD_COLUMNS}
APPEND_ONLY_PRIVILEGES: dict[str, str] = {
    AuditEvent._meta.db_table: "SELECT, INSERT",
    AuditCheckpoint._meta.db_table: "SELECT, INSERT",
    AuditChainHead._meta.db_table: f"SELECT, INSERT, UPDATE ({', '.join(_CHAIN_HEAD_COLUMNS)})",
    AuditVerification._meta.db_table: "SELECT, INSERT",
}
DATA_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"
SEQUENCE_PRIVILEGES = "USAGE, SELECT"

logger = logging.getLogger(__name__)

_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class DatabaseRoleError(ToolhubError):
    """The application role cannot be set up as asked."""


@dataclass
class RoleReport:
    """What ``db_app_role_ensure`` did, for the command to print."""

    role: str
    owner: str
    database: str
    schema: str
    created: bool
    password_set: bool
    warnings: list[str] = field(default_factory=list)
    #: The time bounds and plan setting set on the role (behind a transaction pooler only: ``toolhub.db_pooler``).
    bounds: list[str] = field(default_factory=list)


def db_app_role_ensure(*, role: str, password: str | None = None, using: str = "default") -> RoleReport:
    """Create or update the application role and grant it exactly what the application needs.

    Run as the owner of the tables (the role that ran ``migrate``). Every table and sequence of the
    schema gets read/write rights, the audit tables only ``APPEND_ONLY_PRIVILEGES``, and default
    privileges cover tables later migrations create (``db_app_roles_refresh`` narrows them again on the
    audit tables after every ``migrate``).
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        raise DatabaseRoleError(
            f"Database roles exist on PostgreSQL only; this database is {connection.vendor}, where the "
            "application and migrations share one connection: nothing to do. Point DATABASE_URL at PostgreSQL."
        )
    if not _ROLE_NAME.match(role):
        raise DatabaseRoleError(
            f"Role name {role!r} is not allowed: use lower-case letters, digits and underscores (at most 63)."
        )
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_database(), current_schema()")
        current, database, schema = cursor.fetchone()
        owned = _audit_owners(cursor, schema)
        owners = sorted({owner for what, owner in owned if what.startswith("table ")}) or [current]
        if role == current:
            raise DatabaseRoleError(
                f"The application role must not be the owner {current!r} that runs migrations: name another role."
            )
        # Whoever owns an audit table, one of its trigger functions or the schema could disable, replace or
        # drop the trail's guards; so could whoever runs this (the owner, or a superuser) and its members.
        for what, owner in owned:
            if role == owner:
                raise DatabaseRoleError(
                    f"The application role must not be the owner {owner!r} of {what}: it could switch off or "
                    "drop the audit trail's guards. Name another role, or make the role that runs migrations "
                    f"the owner of {what}."
                )
        guarded = [("", current), *owned]
        cursor.execute(
            "SELECT rolsuper, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = %s",
            [role],
        )
        existing = cursor.fetchone()
        name = connection.ops.quote_name(role)
        if existing is None:
            cursor.execute(f"CREATE ROLE {name} LOGIN NOCREATEDB NOCREATEROLE")
        else:
            if any(existing):
                raise DatabaseRoleError(
                    f"Role {role!r} is a superuser or may replicate or bypass row security, so no privilege "
                    f"binds it: use another role, or run ALTER ROLE {role} NOSUPERUSER NOREPLICATION NOBYPASSRLS."
                )
            # A role that may create roles could make itself a member of the owner.
            cursor.execute(f"ALTER ROLE {name} LOGIN NOCREATEDB NOCREATEROLE")
        if memberships := _owners_of_guards(cursor, role, guarded):
            what, owner = memberships[0]
            raise DatabaseRoleError(
                f"Role {role!r} is a member of the owner {owner!r}{f' of {what}' if what else ''} and could "
                f"act as it: REVOKE {_quoted(cursor, owner)} FROM {_quoted(cursor, role)}."
            )
        if password:
            # Only the SCRAM verifier leaves this process, so no log or statement history holds the password.
            verifier = connection.connection.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
            cursor.execute(f"ALTER ROLE {name} PASSWORD %s", [verifier.decode()])
        _grant(cursor, connection.ops.quote_name, role=role, owners=owners, database=database, schema=schema)
        if exposed := _beyond_appending(cursor, schema, role):
            raise DatabaseRoleError(f"Role {exposed}: the role is left as it was; run this again after.")
        cursor.execute(f"COMMENT ON ROLE {name} IS %s", [APP_ROLE_MARK])
        bounds = (
            role_settings_set(cursor, name, connection.ops.quote_name(database), connection.timezone_name)
            if pooled()
            else []
        )
        cursor.execute("SELECT has_schema_privilege(%s, %s, 'CREATE')", [role, schema])
        warnings = []
        if cursor.fetchone()[0]:
            warnings.append(
                f"Role {role!r} may create objects in schema {schema!r} (PUBLIC holds CREATE there): "
                f"run REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC."
            )
    return RoleReport(
        role=role,
        owner=", ".join(owners),
        database=database,
        schema=schema,
        created=existing is None,
        password_set=bool(password),
        warnings=warnings,
        bounds=bounds,
    )


def db_app_roles_refresh(using: str = "default") -> list[str]:
    """After ``migrate``: narrow every role to append-only on the audit tables; grant toolhub's roles their rights.

    A migration that re-creates an audit table (migrating back past it and forward) makes it with the owner's
    default privileges, full data rights for whoever holds them; one run by another role than the owner (a
    superuser) gives the application role nothing on its new tables. Narrowing is always safe, so it applies to
    every role (and PUBLIC) but the table's owner. Granting is not: only roles ``toolhub_db_roles`` marked
    (``APP_ROLE_MARK``) and set up here (holding the data rights as default privileges of an audit table's owner
    in this schema) get their rights again, so a DBA's role with the same defaults keeps what the DBA gave it.
    Not PostgreSQL: nothing is done. Only grants and revokes run (no role is created or altered), so it is
    idempotent; the role checks stay with ``db_app_role_ensure``. A role that may not read the default privileges
    (or role comments) still narrows, but grants nothing, logging why. Returns the roles granted.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_database(), current_schema()")
        current, database, schema = cursor.fetchone()
        _narrow_audit_rights(cursor, schema)
        owners = sorted({owner for what, owner in _audit_owners(cursor, schema) if what.startswith("table ")})
        try:
            with transaction.atomic(using=using):  # a savepoint: what was narrowed stays narrowed
                set_up = _set_up_roles(cursor, schema, owners or [current], marked=True)
        except DatabaseError:
            # Migrations already applied must not fail on it; the system check says the roles went unchecked.
            logger.warning("Application roles not granted again: the catalogs could not be read", exc_info=True)
            return []
        roles = [role for role in set_up if role != current]
        # The defaults are there (with the comment, they mark the roles); renewing them needs membership in their owner.
        cursor.execute("SELECT o FROM unnest(%s::text[]) o WHERE pg_has_role(current_user, o, 'USAGE')", [owners])
        renewable = [owner for (owner,) in cursor.fetchall()]
        if owners and not renewable:
            return []  # not the owner (nor a member, nor a superuser): its grants would be refused or do nothing
        for role in roles:
            _grant(cursor, connection.ops.quote_name, role=role, owners=renewable, database=database, schema=schema)
    return roles


def db_app_roles_exposed(using: str = "default") -> list[str]:
    """What each marked role may do to the audit trail beyond appending, through a role it is a member of.

    ``toolhub_db_roles`` refuses such a role, and ``migrate`` narrows every grantee's own rights on the audit tables;
    but a membership granted afterwards (``GRANT etl_writer TO toolhub_app``, ``pg_write_all_data``, the owner, a
    superuser) lends the application role its rights, and no revoke on the audit tables takes those back. One line
    per role, for the system check (``toolhub.W008``). Not PostgreSQL: nothing.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        schema, owners = _schema_and_owners(cursor)
        roles = _set_up_roles(cursor, schema, owners, marked=True)
        return [f"Role {exposed}" for role in roles if (exposed := _beyond_appending(cursor, schema, role))]


def db_app_roles_unmarked(using: str = "default") -> list[str]:
    """Login roles set up as ``toolhub_db_roles`` sets its role up, but without its mark (an earlier toolhub's).

    ``migrate`` no longer grants them their rights (``db_app_roles_refresh``), so a table a migration adds or
    re-creates is out of their reach (or narrowed to append-only) until ``toolhub_db_roles`` marks them: the system
    check (``toolhub.W009``) names them. Not PostgreSQL: nothing.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        schema, owners = _schema_and_owners(cursor)
        return _set_up_roles(cursor, schema, owners, marked=False)


def _schema_and_owners(cursor: CursorWrapper) -> tuple[str, list[str]]:
    """The current schema and the owners of its audit tables (whoever connects, if there are none yet)."""
    cursor.execute("SELECT current_user, current_schema()")
    current, schema = cursor.fetchone()
    owners = sorted({owner for what, owner in _audit_owners(cursor, schema) if what.startswith("table ")})
    return schema, owners or [current]


def _set_up_roles(cursor: CursorWrapper, schema: str, owners: list[str], *, marked: bool) -> list[str]:
    """The roles holding the data rights as default privileges of ``owners`` in ``schema``, marked or not.

    Marked: the roles ``toolhub_db_roles`` set up here. Unmarked: login roles that also hold its sequence defaults,
    as the command of a toolhub before the mark left them (a DBA's group or ETL role rarely holds both and logs in).
    """
    cursor.execute(
        "SELECT r.rolname FROM pg_default_acl d JOIN pg_namespace n ON n.oid = d.defaclnamespace "
        "CROSS JOIN LATERAL aclexplode(d.defaclacl) a JOIN pg_roles r ON r.oid = a.grantee "
        "WHERE n.nspname = %s AND pg_get_userbyid(d.defaclrole) = ANY(%s) "
        "AND (shobj_description(r.oid, 'pg_authid') IS NOT DISTINCT FROM %s) = %s AND (%s OR r.rolcanlogin) "
        "GROUP BY r.rolname "
        "HAVING array_agg(a.privilege_type) FILTER (WHERE d.defaclobjtype = 'r') "
        "@> ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'] AND (%s OR array_agg(a.privilege_type) "
        "FILTER (WHERE d.defaclobjtype = 'S') @> ARRAY['USAGE', 'SELECT']) ORDER BY 1",
        [schema, owners, APP_ROLE_MARK, marked, marked, marked],
    )
    return [role for (role,) in cursor.fetchall() if _ROLE_NAME.match(role)]


#: Shown per role and table (how many roles lend rights, tables are four): a message stays a few lines long.
_MAX_NAMED = 5


def _beyond_appending(cursor: CursorWrapper, schema: str, role: str) -> str:
    """What ``role`` may do to the audit tables beyond ``APPEND_ONLY_PRIVILEGES``, and through which roles; or "".

    Every role it is a member of counts (itself, PUBLIC, the roles it inherits from and those it may ``SET ROLE``
    to), with their own memberships and predefined roles (``pg_write_all_data``), superusers and owners: it may act
    as any of them. TRIGGER would let it add a trigger that drops or rewrites what is appended; REFERENCES, a key
    that blocks it. UPDATE counts on a column an append does not move. Owning a trigger function or the schema needs
    no right on a table: its owner may replace the guard's body or drop the tables. A superuser is a member of every
    role and bound by no right: it is named as one. Role names are quoted as SQL takes them (the REVOKE to run).
    """
    cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
    if any(superuser for (superuser,) in cursor.fetchall()):
        return f"{role!r} is a superuser, which no right binds (ALTER ROLE {_quoted(cursor, role)} NOSUPERUSER)"
    moved = [f"{table}.{column}" for table, columns in APPEND_COLUMNS.items() for column in columns]
    cursor.execute(
        "SELECT c.relname, m.rolname, array_agg(DISTINCT x.p ORDER BY x.p) FROM pg_roles m "
        "CROSS JOIN pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL ("
        "SELECT p FROM unnest(ARRAY['DELETE', 'TRUNCATE', 'TRIGGER']) p WHERE has_table_privilege(m.oid, c.oid, p) "
        "UNION SELECT p FROM pg_attribute t CROSS JOIN unnest(ARRAY['UPDATE', 'REFERENCES']) p "
        "WHERE t.attrelid = c.oid AND t.attnum > 0 AND NOT t.attisdropped "
        "AND NOT (p = 'UPDATE' AND c.relname || '.' || t.attname = ANY(%s)) "
        "AND has_column_privilege(m.oid, c.oid, t.attnum, p)) x "
        "WHERE n.nspname = %s AND c.relname = ANY(%s) AND pg_has_role(%s, m.oid, 'MEMBER') "
        "GROUP BY 1, 2 ORDER BY 1, 2",
        [moved, schema, list(APPEND_ONLY_PRIVILEGES), role],
    )
    rows = cursor.fetchall()
    owning = _owners_of_guards(cursor, role, _audit_owners(cursor, schema))
    if not rows and not owning:
        return ""
    excess: dict[str, set[str]] = {}
    for table, _, privileges in rows:
        excess.setdefault(table, set()).update(privileges)
    done = [f"{', '.join(sorted(privileges))} on {table}" for table, privileges in excess.items()]
    done += [f"replace or drop {what} as its owner" for what, _ in owning[:_MAX_NAMED]]
    what = "; ".join(done) + (f" and {len(owning) - _MAX_NAMED} more" if len(owning) > _MAX_NAMED else "")
    lenders = sorted({lender for _, lender, _ in rows if lender != role} | {owner for _, owner in owning})
    if not lenders:
        return f"{role!r} may {what} beyond appending, by its own or PUBLIC's grants"
    quoted = [_quoted(cursor, lender) for lender in lenders]
    named = ", ".join(quoted[:_MAX_NAMED]) + (
        f" and {len(quoted) - _MAX_NAMED} more" if len(quoted) > _MAX_NAMED else ""
    )
    return (
        f"{role!r} may {what} beyond appending, as a member of {named} "
        f"(REVOKE {quoted[0]} FROM {_quoted(cursor, role)}, or take those rights from {quoted[0]})"
    )


def _owners_of_guards(cursor: CursorWrapper, role: str, owned: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (what, owner) pairs of ``owned`` whose owner ``role`` is a member of (or is), so may act as."""
    if not owned:
        return []
    cursor.execute(
        "SELECT o FROM unnest(%s::text[]) o WHERE pg_has_role(%s, o::name, 'MEMBER')",
        [sorted({owner for _, owner in owned}), role],
    )
    members = {owner for (owner,) in cursor.fetchall()}
    return [(what, owner) for what, owner in owned if owner in members]


def _quoted(cursor: CursorWrapper, role: str) -> str:
    """``role`` as SQL names it (``"ETL writer"``): a name put in a statement to run is copied as it stands."""
    cursor.execute("SELECT quote_ident(%s)", [role])
    quoted: str = cursor.fetchone()[0]
    return quoted


def _narrow_audit_rights(cursor: CursorWrapper, schema: str) -> None:
    """Take from every grantee but the owner what an audit table grants beyond ``APPEND_ONLY_PRIVILEGES``.

    Nothing is added that the grantee did not hold: table-wide UPDATE of a chain head becomes UPDATE of the
    columns an append moves, so an unmarked application role of an earlier toolhub goes on appending. Only what
    the owner (or whoever runs this, for what it granted) granted can be revoked; CASCADE takes what a grantee
    passed on with a grant option too. A role that is neither (nor a member of the owner) leaves the table alone:
    PostgreSQL refuses its REVOKE outright when it holds nothing there, which would fail a ``migrate`` it runs.
    """
    tables = list(APPEND_ONLY_PRIVILEGES)
    # A dropped column keeps its privileges, naming roles that may be gone since: they grant nobody anything.
    live = (
        "(a.grantee = 0 OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = a.grantee)) "
        "AND (pg_has_role(current_user, c.relowner, 'USAGE') "
        "OR a.grantor = (SELECT oid FROM pg_roles WHERE rolname = current_user))"
    )
    grantee = "CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END"
    cursor.execute(
        f"SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relname, {grantee}, "
        "array_agg(DISTINCT a.privilege_type ORDER BY a.privilege_type) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL aclexplode(c.relacl) a "
        f"WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.grantee <> c.relowner AND {live} "
        "AND a.privilege_type NOT IN ('SELECT', 'INSERT') GROUP BY 1, 2, 3 ORDER BY 1, 3",
        [schema, tables],
    )
    for table, relname, role, excess in cursor.fetchall():
        cursor.execute(f"REVOKE {', '.join(excess)} ON TABLE {table} FROM {role} CASCADE")
        if "UPDATE" in excess and relname in APPEND_COLUMNS:
            cursor.execute(f"GRANT UPDATE ({', '.join(APPEND_COLUMNS[relname])}) ON TABLE {table} TO {role}")
    cursor.execute(
        f"SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relname, {grantee}, "
        "quote_ident(t.attname), t.attname, a.privilege_type FROM pg_attribute t JOIN pg_class c ON c.oid = t.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL aclexplode(t.attacl) a "
        f"WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.grantee <> c.relowner AND {live} "
        "AND t.attnum > 0 AND NOT t.attisdropped AND a.privilege_type NOT IN ('SELECT', 'INSERT') ORDER BY 1, 3, 4",
        [schema, tables],
    )
    for table, relname, role, column, attname, privilege in cursor.fetchall():
        if privilege == "UPDATE" and attname in APPEND_COLUMNS.get(relname, ()):
            continue
        cursor.execute(f"REVOKE {privilege} ({column}) ON TABLE {table} FROM {role} CASCADE")


def _audit_owners(cursor: CursorWrapper, schema: str) -> list[tuple[str, str]]:
    """Who owns what guards the audit trail: each audit table, each function its triggers run, and the schema.

    (what, owner role) pairs, tables first. The owner of a table may disable its triggers or drop it, of a
    trigger function replace its body, of the schema drop the tables in it.
    """
    tables = list(APPEND_ONLY_PRIVILEGES)
    cursor.execute(
        "SELECT 'table ' || c.relname, pg_get_userbyid(c.relowner) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = ANY(%s) "
        "ORDER BY c.relname",
        [schema, tables],
    )
    found = [(what, owner) for what, owner in cursor.fetchall()]
    cursor.execute(
        "SELECT DISTINCT 'function ' || p.oid::regprocedure::text || ' (a trigger of ' || c.relname || ')', "
        "pg_get_userbyid(p.proowner) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
        "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE NOT t.tgisinternal AND n.nspname = %s AND c.relname = ANY(%s) ORDER BY 1",
        [schema, tables],
    )
    found += [(what, owner) for what, owner in cursor.fetchall()]
    # Since PostgreSQL 15 ``public`` belongs to pg_database_owner, that is to the database's owner.
    cursor.execute(
        "SELECT pg_get_userbyid(nspowner), (SELECT pg_get_userbyid(datdba) FROM pg_database "
        "WHERE datname = current_database()) FROM pg_namespace WHERE nspname = %s",
        [schema],
    )
    for owner, database_owner in cursor.fetchall():
        if owner == "pg_database_owner":
            found.append((f"schema {schema} (as the database's owner)", database_owner))
        else:
            found.append((f"schema {schema}", owner))
    return found


def _grant(
    cursor: CursorWrapper,
    quote: Callable[[str], str],
    *,
    role: str,
    owners: list[str],
    database: str,
    schema: str,
) -> None:
    name, in_schema = quote(role), quote(schema)
    cursor.execute(f"GRANT CONNECT ON DATABASE {quote(database)} TO {name}")
    cursor.execute(f"GRANT USAGE ON SCHEMA {in_schema} TO {name}")
    cursor.execute(f"GRANT {DATA_PRIVILEGES} ON ALL TABLES IN SCHEMA {in_schema} TO {name}")
    cursor.execute(f"GRANT {SEQUENCE_PRIVILEGES} ON ALL SEQUENCES IN SCHEMA {in_schema} TO {name}")
    cursor.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s)",
        [schema, list(APPEND_ONLY_PRIVILEGES)],
    )
    present = {table for (table,) in cursor.fetchall()}  # migrated back, an audit table may not exist (yet)
    for table, privileges in APPEND_ONLY_PRIVILEGES.items():
        if table not in present:
            continue
        cursor.execute(f"REVOKE ALL ON TABLE {in_schema}.{quote(table)} FROM {name}")
        cursor.execute(f"GRANT {privileges} ON TABLE {in_schema}.{quote(table)} TO {name}")
    # Later migrations create their tables as the owner of the audit tables (who ran the migrations), which
    # may not be who runs this command (a superuser): the defaults are that owner's.
    for owner in owners:
        defaults = f"ALTER DEFAULT PRIVILEGES FOR ROLE {quote(owner)} IN SCHEMA {in_schema}"
        cursor.execute(f"{defaults} GRANT {DATA_PRIVILEGES} ON TABLES TO {name}")
        cursor.execute(f"{defaults} GRANT {SEQUENCE_PRIVILEGES} ON SEQUENCES TO {name}")
