"""Review 2026-12-06 (ck): review of reviews bu (``toolhub.dbroles``, ``toolhub.W008``/``W009``) and bt
(``toolhub.asgi`` WebSocket refusal and ``route_path``, ``toolhub.api.wait_slots._slot_life``), adversarially.

Findings (each fails on 3b32380, passes with the fix):

1. ``toolhub.W008`` missed a marked role made a member of the owner of an audit trigger's function (or of the
   schema) that holds no right on the tables: as that owner it may replace the guard's body (or drop the tables),
   though ``toolhub_db_roles`` refuses that very membership. ``_beyond_appending`` now names it (one helper,
   ``_owners_of_guards``, for the command's refusal and the check).
2. A marked role later made a superuser was reported as able to act "as a member of" every role of the cluster,
   with a ``REVOKE`` of a role it is no member of: it is now named as a superuser, with ``NOSUPERUSER`` to run.
3. The ``REVOKE`` the message tells the operator to run named roles unquoted (``REVOKE ETL writer FROM ...``):
   names are quoted as SQL takes them.
4. A role running ``migrate`` (or ``check --database``) that may not read ``pg_default_acl`` (or role comments)
   crashed the checks, so ``migrate`` did not start, and left the connection's transaction aborted: the check now
   warns that the roles could not be checked, in a savepoint. Its ``post_migrate`` refresh failed the same way,
   after the migrations were applied: it now keeps its narrowing and skips the grants, logging why.

Checked and holds:
- a role granted ``pg_read_all_data`` only is not named; a right PUBLIC holds is named ("by its own or PUBLIC's
  grants"); a NOINHERIT member of the tables' owner is named (it may ``SET ROLE``);
- run as the application role itself (the web processes' connection), the checks read what they need and name it
  as the owner's run would; the command, ``migrate``'s refresh and the checks all read ``current_schema()`` of the
  same connection, where Django creates the tables, so another search_path moves all of them together;
- cost: ``_beyond_appending`` on a cluster with 5000 roles and 3000 more tables took 8 ms per marked role
  (``pg_class`` is reached by its name index, four rows; ``pg_has_role`` filters ``pg_authid`` once per table);
- messages are bounded (four tables, five privileges, at most five roles named and a count) and hold role and table
  names only, never a comment or a password;
- a ``websocket.disconnect`` before any connect ends the refusal without sending anything; ``root_path + '/mcp/'``
  with a query string goes to the MCP app with its query string and the path ``root_path + '/mcp'``; the lifespan
  goes to the MCP app whatever the root path (``tests/mcp/test_mcp_root_path.py`` serves under one);
- ``_slot_life`` with ``MCP_CALL_WAIT_SECONDS`` 0 or fractional is a whole number of seconds no shorter than either
  wait plus the spare (never 0, which a cache takes as "expire at once"); negatives are refused by the settings.
"""

import asyncio
import math
import uuid
from typing import Any

import pytest
from django.core.checks import CheckMessage, run_checks
from django.core.management import call_command
from django.db import connection

import toolhub.asgi as toolhub_asgi
from toolhub.api.wait_slots import _SLOT_SPARE_SECONDS, _slot_life
from toolhub.conf import ToolhubSettings


def _run(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _role(prefix: str) -> str:
    """A role name of this review (``ck_``); roles made in the test's transaction vanish with it."""
    assert connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL"
    return f"ck_{prefix}_{uuid.uuid4().hex[:10]}"


def _app_role() -> str:
    role = _role("app")
    call_command("toolhub_db_roles", "--role", role, stdout=None)
    return role


def _checked(check_id: str) -> list[CheckMessage]:
    return [found for found in run_checks(databases=["default"]) if found.id == check_id]


def _named(role: str) -> list[str]:
    """What ``toolhub.W008`` says of ``role``."""
    return [str(found.msg) for found in _checked("toolhub.W008") if repr(role) in str(found.msg)]


def _trigger_functions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT p.oid::regprocedure::text FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relname = 'toolhub_auditevent' AND NOT t.tgisinternal"
        )
        return [function for (function,) in cursor.fetchall()]


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_member_of_an_audit_trigger_functions_owner_is_named() -> None:
    """Found: a marked role made a member of the owner of the audit triggers' functions (a role with no right on the
    tables) was not named by ``toolhub.W008``, though as that owner it may replace the guard's body.
    Expect: named, with the function and the REVOKE to run."""
    role, owner = _app_role(), _role("fnowner")
    functions = _trigger_functions()
    assert functions
    _run(f"CREATE ROLE {owner} NOLOGIN", *[f"ALTER FUNCTION {function} OWNER TO {owner}" for function in functions])
    assert _named(role) == []

    _run(f"GRANT {owner} TO {role}")

    (message,) = _named(role)
    assert f"replace or drop function {functions[0]}" in message
    assert f"as a member of {owner} (REVOKE {owner} FROM {role}" in message


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_marked_role_made_a_superuser_is_named_as_one() -> None:
    """Found: a marked role made a superuser was named as "a member of" every role of the cluster, with a REVOKE of a
    role it is no member of. Expect: named as a superuser, with ``ALTER ROLE ... NOSUPERUSER``."""
    role = _app_role()
    _run(f"ALTER ROLE {role} SUPERUSER")

    (message,) = _named(role)
    assert f"ALTER ROLE {role} NOSUPERUSER" in message
    assert "REVOKE" not in message and "member" not in message


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_revoke_to_run_quotes_the_lenders_name() -> None:
    """Found: the REVOKE to run named a lending role as it is spelled (``REVOKE ck_Etl x FROM ...``), which SQL takes
    as other names or refuses. Expect: quoted as SQL names it."""
    role, lender = _app_role(), f"{_role('Etl')} writer"
    _run(
        f'CREATE ROLE "{lender}" NOLOGIN',
        f'GRANT TRIGGER ON toolhub_auditevent TO "{lender}"',
        f'GRANT "{lender}" TO {role}',
    )

    (message,) = _named(role)
    assert f'(REVOKE "{lender}" FROM {role}, or take those rights from "{lender}")' in message


@pytest.mark.postgres
@pytest.mark.django_db
def test_checks_run_by_a_role_that_may_not_read_the_catalogs_warn_and_do_not_crash() -> None:
    """Found: run by a role that may not read ``pg_default_acl``, the checks raised ``permission denied`` (``migrate``
    runs them first: it did not start) and left the transaction aborted. Expect: a warning that the roles could not be
    checked, naming what was refused; the connection goes on working."""
    reader = _role("reader")
    _run(
        f"CREATE ROLE {reader} NOLOGIN", "REVOKE SELECT ON pg_catalog.pg_default_acl FROM PUBLIC", f"SET ROLE {reader}"
    )
    try:
        (warned,) = _checked("toolhub.W008")
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == reader
    finally:
        _run("RESET ROLE")
    assert "could not be checked: permission denied for table pg_default_acl" in str(warned.msg)
    assert "manage.py check --database default" in str(warned.hint)


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("given", ["pg_read_all_data", "PUBLIC", "NOINHERIT owner"])
def test_read_only_predefined_roles_pass_public_and_noinherit_owner_members_are_named(given: str) -> None:
    """Found: nothing (holds).
    Expect: ``pg_read_all_data`` alone is append-only enough (not named); a right PUBLIC holds is named; a NOINHERIT
    member of the tables' owner is named (``SET ROLE`` lends it the owner's rights)."""
    role = _app_role()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'toolhub_auditevent'")
        owner = cursor.fetchone()[0]
    statements = {
        "pg_read_all_data": [f"GRANT pg_read_all_data TO {role}"],
        "PUBLIC": ["GRANT TRIGGER ON toolhub_auditcheckpoint TO PUBLIC"],
        "NOINHERIT owner": [f"ALTER ROLE {role} NOINHERIT", f"GRANT {owner} TO {role}"],
    }
    _run(*statements[given])

    named = _named(role)

    if given == "pg_read_all_data":
        assert named == []
    elif given == "PUBLIC":
        assert named == [
            f"Role {role!r} may TRIGGER on toolhub_auditcheckpoint beyond appending, by its own or "
            "PUBLIC's grants (database 'default')."
        ]
    else:
        assert len(named) == 1 and f"as a member of {owner} (REVOKE {owner} FROM {role}" in named[0]


def _asgi(scope: dict[str, Any], messages: list[dict[str, Any]], monkeypatch: Any) -> tuple[list[Any], list[Any]]:
    """Run toolhub's ASGI app on ``scope`` with the MCP app replaced by a recorder: (scopes it got, messages sent)."""
    reached: list[dict[str, Any]] = []

    def recording_mcp_app(path: str) -> Any:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            reached.append(scope)

        return app

    monkeypatch.setattr(toolhub_asgi, "mcp_asgi_app", recording_mcp_app)
    application = toolhub_asgi.build_application()
    sent: list[dict[str, Any]] = []
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout=10))
    return reached, sent


def test_a_websocket_gone_before_its_connect_is_let_go_and_mcp_keeps_its_query_below_the_root_path(
    monkeypatch: Any,
) -> None:
    """Found: nothing (holds).
    Expect: a ``websocket.disconnect`` first ends the refusal, nothing sent; ``/toolhub/mcp/?session=1`` under
    ``root_path=/toolhub`` reaches the MCP app as ``/toolhub/mcp`` with its query string."""
    base = {"asgi": {"version": "3.0"}, "headers": [(b"host", b"testserver")], "root_path": "/toolhub"}
    ws = {**base, "type": "websocket", "path": "/toolhub/mcp", "query_string": b"", "subprotocols": []}
    reached, sent = _asgi(ws, [{"type": "websocket.disconnect", "code": 1006}], monkeypatch)
    assert (reached, sent) == ([], [])

    http = {**base, "type": "http", "method": "GET", "path": "/toolhub/mcp/", "query_string": b"session=1"}
    reached, sent = _asgi(http, [], monkeypatch)
    assert [(scope["path"], scope["root_path"], scope["query_string"]) for scope in reached] == [
        ("/toolhub/mcp", "/toolhub", b"session=1")
    ]


@pytest.mark.parametrize(("rest", "mcp"), [(30, 0), (0.5, 0), (1, 0.25), (0.2, 90.5), (30, 20)])
def test_a_slot_outlives_either_wait_whatever_the_settings(rest: float, mcp: float) -> None:
    """Found: nothing (holds).
    Expect: with ``MCP_CALL_WAIT_SECONDS`` 0 or fractional the slot lives whole seconds, at least the longer wait plus
    the spare; a negative wait is refused by the settings."""
    life = _slot_life(ToolhubSettings(CALL_WAIT_MAX_SECONDS=float(rest), MCP_CALL_WAIT_SECONDS=float(mcp)))
    assert isinstance(life, int) and life == math.ceil(max(rest, mcp)) + _SLOT_SPARE_SECONDS
    assert life >= max(rest, mcp) + _SLOT_SPARE_SECONDS > 0
    with pytest.raises(ValueError):
        ToolhubSettings(MCP_CALL_WAIT_SECONDS=-0.5)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_refresh_after_migrate_by_a_role_that_may_not_read_default_privileges_does_not_fail_migrate() -> None:
    """Found: ``migrate`` run by a role that may not read ``pg_default_acl`` failed in its ``post_migrate`` refresh
    (``permission denied``), after its migrations were applied. Expect: the narrowing done, the renewal of grants
    skipped with a logged warning (``toolhub.W008`` says the roles could not be checked), ``migrate`` ends."""
    from toolhub.dbroles import db_app_roles_refresh

    reader = _role("reader")
    _run(
        f"CREATE ROLE {reader} NOLOGIN", "REVOKE SELECT ON pg_catalog.pg_default_acl FROM PUBLIC", f"SET ROLE {reader}"
    )
    try:
        assert db_app_roles_refresh() == []
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == reader
    finally:
        _run("RESET ROLE")


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_checks_run_as_the_application_role_itself_name_it_as_the_owner_would() -> None:
    """Found: nothing (holds).
    Expect: ``check --database`` run as the application role (the web processes' connection) reads what it needs: the
    role is not named while append-only, and named once a membership lends it more."""
    role = _app_role()
    _run(f"SET ROLE {role}")
    try:
        assert _named(role) == []
    finally:
        _run("RESET ROLE")
    _run(f"GRANT pg_write_all_data TO {role}", f"SET ROLE {role}")
    try:
        (message,) = _named(role)
    finally:
        _run("RESET ROLE")
    assert f"as a member of pg_write_all_data (REVOKE pg_write_all_data FROM {role}" in message
