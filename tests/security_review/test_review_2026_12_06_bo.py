"""Review of 2026-12-06 (bo): review the reviews bi (database roles), bf (subagents), bh (schema depth and loops).

Each test fails on the reviewed code (main at 97171a2) and states what was found and what is expected.

Findings:

1. (bh) ``checked_object_schema`` bounded how deeply ``$ref`` and same-value keywords nest (64) but not how many
   schemas they fan out to: ``a0: allOf [$ref a1, $ref a1]``, ``a1: allOf [$ref a2, $ref a2]``... (a few hundred
   bytes, 36 deep at 18 levels) was accepted, and validating one string against it checked it 2**18 times (15 s
   measured; 25 levels is half an hour of a web or worker process per call, from a remote MCP server's listing).
   The loop check now also counts the schemas a value is checked against, repeats included, up to
   ``MAX_SCHEMA_APPLICATIONS`` (10,000), in the same linear walk.

2. (bi) ``migrate`` run by a role that is not the audit tables' owner (nor a member, nor a superuser) and holds no
   privilege on one of them failed with "permission denied for table toolhub_auditevent" as soon as any other role
   held more than append-only there: ``_narrow_audit_rights`` issued a REVOKE PostgreSQL refuses outright from a
   role with nothing on the table. Narrowing now revokes only what this role may (it owns the table, is a member of
   its owner, or granted the right itself); granting to marked roles is skipped when it is no member of an owner.

3. (bh) ``_looping_ref`` followed ``$ref`` only: a loop through ``$dynamicRef`` (``{"$dynamicAnchor": "a",
   "$dynamicRef": "#a"}``) was accepted and validating any value raised ``RecursionError``; a fan-out through
   ``$dynamicRef`` escaped the bound of finding 1 (18 levels: 8 s). ``$dynamicRef``/``$recursiveRef`` are now
   followed to every schema with the matching dynamic anchor (the root for ``$recursiveRef``), as validation may.

Checked and holding (no test here):

- (bh) The non-recursive walks are linear: ``_nodes`` and ``_nesting`` walk the document tree (a shared ``$ref`` is
  not followed), ``_looping_ref`` finishes each node once (memoized by identity, the registry hands back the
  schema's own dicts). Recursive types through ``properties``/``items`` (a tree, ``$ref: "#"`` to the root under
  a property) stay accepted and validate; a schema shared by many properties counts once per property.
- (bi) A migrate run as a member of the owner role (not the owner) narrows as the owner would: a DBA's UPDATE and
  TRUNCATE with grant option, and what it passed on, are revoked (checked by hand on PostgreSQL 15). CASCADE only
  reaches grants of the same privileges on the same audit table (a grant option's dependents); a DBA's SELECT-only
  backup, monitoring or replication role keeps SELECT. Run as the application role (SELECT, INSERT held), the
  refresh revokes nothing it did not grant, with warnings only. Role comments are cluster-wide, but a marked role
  is granted only where it holds the data defaults of this database's owners in this schema. The refresh takes
  about 10 ms against a 20 s ``migrate`` of the test database (once per migrate: ``sender=self``).
- (bf) ``_refuse_unless_going`` adds no lock: ``_start_child`` already locked the parent run alone (a subagent tool is
  not atomic, so no call row is held); cancelling locks the run tree before calls, so no new lock-order cycle.
  The refused call fails through the pipeline's ordinary failure (audited, status ``failed``; review bf's test).
"""

import time
import uuid
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from toolhub.dbroles import db_app_roles_refresh
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import Tool
from toolhub.tools.jsonschema_args import MAX_SCHEMA_APPLICATIONS


def _fan_out(levels: int, width: int = 2) -> dict[str, Any]:
    defs: dict[str, Any] = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}] * width} for i in range(levels)}
    defs[f"a{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs}


@pytest.mark.parametrize(("levels", "width"), [(30, 2), (12, 4), (3, 30)])
def test_a_fan_out_of_shared_references_is_refused_when_built(levels: int, width: int) -> None:
    """Found: shared ``$ref`` s fanned out by ``allOf`` were accepted; validating one value checked it against
    ``width ** levels`` schemas (2**18: 15 s).

    Expect: the tool is refused when built, quickly, naming the bound; nothing is validated against it.
    """
    started = time.monotonic()
    with pytest.raises(ToolDefinitionError, match=f"more than {MAX_SCHEMA_APPLICATIONS} schemas for one value"):
        Tool.create("crm__laughs", "Laughs.", _fan_out(levels, width), lambda arguments: arguments, allow_any=True)
    assert time.monotonic() - started < 2


def test_shared_definitions_and_recursive_types_stay_schemas() -> None:
    """A definition shared by many properties, a small fan-out, and a tree through ``$ref: "#"`` remain accepted."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            **{f"p{i}": {"$ref": "#/$defs/item"} for i in range(200)},
            "small": _fan_out(6, 3)["properties"]["x"],
            "child": {"$ref": "#"},
        },
        "$defs": {**_fan_out(6, 3)["$defs"], "item": {"allOf": [{"$ref": "#/$defs/a5"}, {"minLength": 1}]}},
    }
    tool = Tool.create("crm__shared", "Shared.", schema, lambda arguments: arguments, allow_any=True)
    value = {"p0": "x", "small": "y", "child": {"p1": "z", "child": {}}}
    assert tool.validate_arguments(value) == value


DYNAMIC_LOOP = {"$defs": {"a": {"$dynamicAnchor": "a", "$dynamicRef": "#a"}}}
DYNAMIC_FAN = {
    "$defs": {
        **{f"a{i}": {"$dynamicAnchor": f"a{i}", "allOf": [{"$dynamicRef": f"#a{i + 1}"}] * 2} for i in range(30)},
        "a30": {"$dynamicAnchor": "a30", "type": "string"},
    }
}


@pytest.mark.parametrize("defs", [DYNAMIC_LOOP, DYNAMIC_FAN], ids=["loop", "fan-out"])
def test_dynamic_references_are_followed_by_the_loop_check(defs: dict[str, Any]) -> None:
    """Found: ``$dynamicRef`` was not followed: its loop was accepted (validation raised ``RecursionError``), its
    fan-out escaped the bound on schemas per value.

    Expect: both refused when the tool is built.
    """
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0" if "a0" in defs["$defs"] else "#/$defs/a"}}}
    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        Tool.create("crm__dynamic", "Dynamic.", {**schema, **defs}, lambda arguments: arguments, allow_any=True)


def test_a_recursive_type_through_a_dynamic_reference_is_still_a_schema() -> None:
    """A tree whose children are named by ``$dynamicRef`` (2020-12's extensible recursion) remains accepted."""
    schema = {
        "type": "object",
        "$dynamicAnchor": "node",
        "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}, "name": {"type": "string"}},
    }
    tool = Tool.create("crm__dyntree", "Trees.", schema, lambda arguments: arguments, allow_any=True)
    value = {"name": "a", "kids": [{"name": "b", "kids": []}]}
    assert tool.validate_arguments(value) == value


def _run(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _table_privileges(role: str, table: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p FROM unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE']) p "
            "WHERE has_table_privilege(%s, %s, p)",
            [role, table],
        )
        return {privilege for (privilege,) in cursor.fetchall()}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_migrate_by_a_role_holding_nothing_on_the_audit_tables_does_not_fail() -> None:
    """Found: with a DBA's role holding UPDATE on the audit events, the refresh run by a role with no privilege there
    (a ``migrate`` with nothing to apply) raised "permission denied for table toolhub_auditevent".

    Expect: it finishes, revoking and granting nothing; the next refresh by the owner narrows the DBA's role.
    """
    assert connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL"
    suffix = uuid.uuid4().hex[:12]
    outsider, dba, app = f"outsider_{suffix}", f"dba_{suffix}", f"toolhub_app_{suffix}"
    call_command("toolhub_db_roles", "--role", app, stdout=None)
    _run(
        f"CREATE ROLE {outsider} NOLOGIN",
        f"GRANT USAGE ON SCHEMA public TO {outsider}",
        f"CREATE ROLE {dba} NOLOGIN",
        f"GRANT SELECT, UPDATE, TRUNCATE ON toolhub_auditevent TO {dba}",
    )
    try:
        _run(f"SET ROLE {outsider}")
        try:
            granted = db_app_roles_refresh()
        finally:
            _run("RESET ROLE")
        assert granted == []
        assert _table_privileges(dba, "toolhub_auditevent") == {"SELECT", "UPDATE", "TRUNCATE"}
        assert app in db_app_roles_refresh()  # beside any other role toolhub_db_roles marked (the workers' tests)
        assert _table_privileges(dba, "toolhub_auditevent") == {"SELECT"}
        assert _table_privileges(app, "toolhub_auditevent") == {"SELECT", "INSERT"}
    finally:
        for role in (outsider, dba, app):
            _run(f"DROP OWNED BY {role}", f"DROP ROLE {role}")
