"""Review 2026-12-06 (fv): review fn's ``toolhub.W014`` (``db_pooler.server_bounds``), review fh's Tokens page
(``admin_tokens``, ``token_use.uses_recorded_since``) and the split of ``toolhub/checks.py``.

Each finding's test failed on the code as found (main at fe8d6ff) and passes now.

Findings:

1. The Tokens list read ``django_migrations`` (when uses began to be recorded) twice for every page, unfiltered
   included, and six times with the facets shown (``?_facets=1``), though its comment says once per page: the
   ``last used`` filter read it before looking whether a choice was made, and Django asks the filter once per choice
   for the facet counts. Now it is read once per request (``admin_tokens._recorded_since``), by the rows and the
   filter alike. ``test_the_tokens_list_reads_when_uses_began_once_per_page``.
2. W014's hint when the role's bounds could not be read (database unreachable, transaction aborted) told the operator
   to run ``manage.py toolhub_db_roles --role the application role``: a command that fails as written, and nothing
   about the read that failed. It now says to make the database reachable as the application role and run the
   check again, the role a placeholder (``<the application role>``).
   ``test_w014_unreadable_hint_names_no_role_as_a_command_argument``.

Checked and holding:

- W014 run in autocommit (the check opens its own transaction), inside an operator command's transaction whose
  ``SET LOCAL statement_timeout = 0`` lift must survive it, and inside a ``READ ONLY`` transaction (as on a hot
  standby): the ``SAVEPOINT`` and ``set_config(name, NULL, true)`` work there, the role's bounds read as set, the
  lift and the other locals are what they were after it (``test_w014_reads_the_role_inside_a_lifted_read_only_
  transaction``).
- W014 on a connection whose transaction is already aborted: no exception escapes ``check``; it warns that the bounds
  could not be read (``test_w014_on_an_aborted_transaction_warns_that_it_could_not_read``).
- A database setting (``ALTER DATABASE ... SET``, source ``database``) and a role-in-database one (fn's test) are
  read from the catalogue; a session that started with a database bound since removed warns, as fn's role case
  (``test_w014_a_removed_database_bound_is_not_taken_from_the_sessions_start``). A bound given in the connection's
  ``options`` (source ``client``) counts as none (``test_w014_a_bound_only_in_the_connections_options_warns``).
- Probed by hand on PostgreSQL 15 (no test: it changes the shared server's configuration): ``ALTER SYSTEM`` then
  ``pg_reload_conf()`` gives source ``configuration file`` and passes; ``ALTER SYSTEM RESET`` and a reload make an
  open session's starting value ``default`` again (0: warns). ``set_config(name, NULL, true)`` gives the
  ``reset_val`` with its ``reset_source`` (``database user``, ``client``, ``configuration file``, ``default``) and
  ``ROLLBACK TO SAVEPOINT`` restores a ``SET LOCAL``; ``SAVEPOINT`` in autocommit fails (``server_bounds`` has no
  caller outside ``role_unbounded``'s atomic block). PostgreSQL's source names (``guc.c`` ``GucSource_Names``):
  ``override`` is set for statement_timeout only in autovacuum workers, ``interactive``/``test``/``session`` are
  never a starting value, so the four of ``_THE_SERVERS`` are all the server's own.
- Known and documented (README, Scaling out), not a finding: a long-lived pooled session that started from a role or
  database bound since removed reads as unknown, so W014 warns even when ``postgresql.conf`` bounds new
  connections, until the pooler replaces that server connection; a warning, never a pass.
- ``check --deploy --database default`` (pooler on, ``*`` hosts, ``http://`` origin, demo on, no broker, no audit
  key): each of W004, W010-W014 once; every toolhub check function registered once, the moved ones with the same
  tags and ``deploy`` flag as before the split (W006-W009 ``database``) (``test_every_toolhub_check_is_registered_
  once``). The README names no module of the checks; the tests importing moved functions were updated by the split.
- Tokens page: a token made before uses were recorded sorts with the never-used ones, before any stamped token,
  ascending and after them descending, on SQLite and PostgreSQL (``test_sorting_puts_a_token_unstamped_since_
  recording_with_the_oldest``); its "not since" time is shown in the current time zone while the filters' 30 days
  are absolute (``test_not_since_is_shown_in_the_current_time_zone``); the list is still refused (403) to a tenant's
  staff holding every token permission (``CrossTenantOnly``, fh's test); the bulk deletion of annotated rows
  (``delete_queryset``) deletes them.
- Squashed and faked migrations: Django records each replaced migration when a squash is applied (so the
  ``0050_api_token_use`` row is there), a fake apply records its own time (the start moves later: older tokens read
  "not since", never "never", the safe side), and a database with no row reads as before (fh's test).
"""

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.core.checks.registry import registry
from django.db import DataError, connection, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.helpers import console
from tests.security_review.pg_races import dsn
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.db_pooler import check_pooler_role_bounds, transactions_unbounded
from toolhub.models import ApiTokenUse

TOKENS = "/admin/authtoken/tokenproxy/"
POOLED = {**settings.TOOLHUB, "TRANSACTION_POOLER": True}
BOUNDED = {"DATABASE_STATEMENT_TIMEOUT": 45, "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": 300}


def _rows(page: str) -> dict[str, str]:
    """The Tokens list's rows: each token's user, and what its "last used" column says (as review fh reads them)."""
    row = r'class="field-user[^"]*"><a [^>]*>([^<]+)</a></th>.*?class="field-last_used">([^<]*)<'
    return dict(re.findall(row, page))


def _stamp(key: str, ago: timedelta) -> None:
    ApiTokenUse.objects.update_or_create(
        token_id=key_digest(key), defaults={"last_used_at": timezone.now() - ago, "channel": "rest"}
    )


def _recording_began(ago: timedelta) -> Any:
    recorded = MigrationRecorder.Migration.objects.filter(app="toolhub", name="0050_api_token_use")
    start = timezone.now() - ago
    assert recorded.update(applied=start) == 1
    return start


def _made_before_recording(user: User, start: Any) -> str:
    from rest_framework.authtoken.models import Token

    key = api_key_issue(user)
    Token.objects.filter(user=user).update(created=start - timedelta(days=50))
    return key


# --- Tokens page --------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_tokens_list_reads_when_uses_began_once_per_page() -> None:
    """Found: the list read ``django_migrations`` twice on every page (the rows' annotation, and the ``last used``
    filter before it looked whether a choice was made) and six times with the facets shown (the filter asked once per
    choice), though the code says once per page.
    Expect: one read per page, filtered, sorted, searched or with facets, whatever the number of rows."""
    _recording_began(timedelta(days=3))
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))
    pages = [
        "",
        "?used=never",
        "?used=unused",
        "?used=recently",
        "?o=2",
        "?q=u1",
        "?_facets=1",
        "?_facets=1&used=never",
    ]
    reads: dict[str, list[int]] = {page: [] for page in pages}
    for tokens in (2, 7):
        while User.objects.filter(auth_token__isnull=False).count() < tokens:
            api_key_issue(User.objects.create_user(f"u{User.objects.count()}", password="pw-u-123456789"))
        for page in pages:
            with CaptureQueriesContext(connection) as queries:
                assert admin.get(TOKENS + page).status_code == 200
            reads[page].append(sum("django_migrations" in query["sql"] for query in queries.captured_queries))

    assert reads == {page: [1, 1] for page in pages}, reads


@pytest.mark.django_db
def test_sorting_puts_a_token_unstamped_since_recording_with_the_oldest() -> None:
    """Holding (regression). Found: a token made before uses were recorded, unstamped since, has no use row, so it
    sorts as "never" does: older than any stamp (``nulls_first``), on SQLite and PostgreSQL alike.
    Expect: ascending, the unstamped (old and never-used) first, then 20 days ago, then 1 day ago; descending the
    stamped newest first and the unstamped last; its row says "not since", the new one "never"."""
    start = _recording_began(timedelta(days=30))
    _made_before_recording(User.objects.create_user("old", password="pw-old-123456789"), start)
    api_key_issue(User.objects.create_user("fresh", password="pw-fresh-12345678"))
    _stamp(api_key_issue(User.objects.create_user("month", password="pw-month-1234567")), timedelta(days=20))
    _stamp(api_key_issue(User.objects.create_user("day", password="pw-day-123456789")), timedelta(days=1))
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))

    ascending = list(_rows(admin.get(f"{TOKENS}?o=2").content.decode()))
    descending = _rows(admin.get(f"{TOKENS}?o=-2").content.decode())

    assert set(ascending[:2]) == {"old", "fresh"} and ascending[2:] == ["month", "day"], ascending
    assert list(descending)[:2] == ["day", "month"] and set(list(descending)[2:]) == {"old", "fresh"}, descending
    assert descending["fresh"] == "never" and descending["old"].startswith("not since"), descending


@pytest.mark.django_db
@override_settings(TIME_ZONE="Pacific/Kiritimati")  # UTC+14: another calendar day than UTC half of the time
def test_not_since_is_shown_in_the_current_time_zone() -> None:
    """Holding (regression). Found: ``last_used`` shows ``localtime(start)``; the filters compare absolute times.
    Expect: the "not since" time is the recording's start in the current time zone (not UTC), and with recording
    begun 29 days 23 hours ago the old unstamped token is in no "unused" list yet, whatever the zone."""
    start = _recording_began(timedelta(days=29, hours=23))
    _made_before_recording(User.objects.create_user("old", password="pw-old-123456789"), start)
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))

    with timezone.override("Pacific/Kiritimati"):
        local = f"{timezone.localtime(start):%Y-%m-%d %H:%M}"
    shown = _rows(admin.get(TOKENS).content.decode())["old"]

    assert shown.startswith(f"not since {local}"), (shown, local)
    assert f"{start:%Y-%m-%d %H:%M}" not in shown  # UTC is 14 hours earlier
    assert _rows(admin.get(f"{TOKENS}?used=unused").content.decode()) == {}
    assert _rows(admin.get(f"{TOKENS}?used=never").content.decode()) == {}


# --- checks.py split ----------------------------------------------------------------------------------------------


def test_every_toolhub_check_is_registered_once() -> None:
    """Holding (regression). Found: ``toolhub/checks.py`` was split into ``database_checks`` and
    ``deployment_checks``; a function left behind in both, or a module not imported by ``ready``, would report its
    ids twice or never.
    Expect: each toolhub check function once, under its new module, with the tags and deploy flag it had."""
    found = {
        f"{check.__module__}.{check.__name__}": (sorted(check.tags), check in registry.deployment_checks)
        for check in registry.get_checks(include_deployment_checks=True)
        if check.__module__.startswith("toolhub")
    }
    names = [
        f"{check.__module__}.{check.__name__}"
        for check in registry.get_checks(include_deployment_checks=True)
        if check.__module__.startswith("toolhub")
    ]

    assert len(names) == len(set(names)) == len(found)
    assert found == {
        "toolhub.checks.check_tools": (["toolhub"], False),
        "toolhub.checks.check_user_model": (["toolhub"], False),  # toolhub.E008 (review 2026-12-07 x)
        "toolhub.database_checks.check_governance_references": (["database", "toolhub"], False),
        "toolhub.database_checks.check_credential_references": (["database", "toolhub"], False),
        "toolhub.database_checks.check_app_roles": (["database", "toolhub"], False),
        "toolhub.deployment_checks.check_audit_key": (["toolhub"], True),
        "toolhub.deployment_checks.check_deployment_posture": (["toolhub"], True),
        "toolhub.db_pooler.check_pooler_role_bounds": (["toolhub"], True),
        "toolhub.sagas.checks.check_compensations": (["toolhub"], False),
    }


# --- W014 ---------------------------------------------------------------------------------------------------------


def _w014() -> list[str]:
    with override_settings(TOOLHUB=POOLED):
        return [message.msg for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"]


@pytest.fixture
def dba() -> Iterator[tuple[psycopg.Connection, str, str]]:
    """A second session (the DBA's), this role-in-database's and this database's ALTER; both reset after."""
    admin = psycopg.connect(**dsn(), autocommit=True)
    role, database = admin.execute("SELECT quote_ident(current_user), quote_ident(current_database())").fetchone()
    try:
        yield admin, f"ALTER ROLE {role} IN DATABASE {database}", f"ALTER DATABASE {database}"
    finally:
        admin.execute(f"ALTER ROLE {role} IN DATABASE {database} RESET ALL")
        admin.execute(f"ALTER DATABASE {database} RESET ALL")
        admin.close()
        connection.close()


def _locals() -> dict[str, str]:
    with connection.cursor() as cursor:
        names = ["statement_timeout", "idle_in_transaction_session_timeout", "lock_timeout", "transaction_read_only"]
        cursor.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [names])
        return dict(cursor.fetchall())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(**BOUNDED)
def test_w014_reads_the_role_inside_a_lifted_read_only_transaction(dba: tuple[psycopg.Connection, str, str]) -> None:
    """Holding (regression). Found: ``server_bounds`` resets each bound for a savepoint rolled back after.
    Expect: in autocommit, and inside an operator command's transaction (``SET LOCAL statement_timeout = 0`` first)
    made ``READ ONLY`` with a ``lock_timeout`` of its own, a role with both bounds passes and one without warns; the
    transaction's settings are what they were before the check (the lift kept)."""
    admin, alter_role, _ = dba
    admin.execute(f"{alter_role} SET statement_timeout = 30000")
    admin.execute(f"{alter_role} SET idle_in_transaction_session_timeout = 300000")
    connection.close()
    results: dict[str, Any] = {"autocommit": _w014()}
    with override_settings(TOOLHUB=POOLED), transactions_unbounded(), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
            cursor.execute("SET LOCAL lock_timeout = 1234")
        before = _locals()
        results["inside"] = _w014()
        after = _locals()
        admin.execute(f"{alter_role} RESET statement_timeout")
        results["inside, role unbounded"] = _w014()

    assert before["statement_timeout"] == "0" and before["transaction_read_only"] == "on", before
    assert after == before
    assert results["autocommit"] == [] and results["inside"] == [], results
    assert len(results["inside, role unbounded"]) == 1
    assert "in this database: statement_timeout: " in results["inside, role unbounded"][0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_w014_on_an_aborted_transaction_warns_that_it_could_not_read() -> None:
    """Holding (regression). Found: the check runs its statements in a transaction of its own (a savepoint inside
    one); in a transaction already aborted the first fails.
    Expect: ``check`` raises nothing; W014 says the role's bounds could not be read, naming the error's class."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            with pytest.raises(DataError):
                cursor.execute("SELECT 1 / 0")
        with override_settings(TOOLHUB=POOLED):
            warnings = check_pooler_role_bounds()
        transaction.set_rollback(True)

    assert [warning.id for warning in warnings] == ["toolhub.W014"]
    assert "the role's bounds could not be read (InternalError)" in warnings[0].msg, warnings[0].msg


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(**BOUNDED)
def test_w014_a_removed_database_bound_is_not_taken_from_the_sessions_start(
    dba: tuple[psycopg.Connection, str, str],
) -> None:
    """Holding (regression). Found: fn tested a role-in-database bound removed while a session kept it; a database's
    own setting (``ALTER DATABASE ... SET``, source ``database``) goes the same way.
    Expect: bounded by the database: passes; once the database's bound is removed, the session that started with it
    (a client's ``SET`` on top) warns, as a new connection has no bound."""
    admin, _, alter_database = dba
    admin.execute(f"{alter_database} SET statement_timeout = 30000")
    admin.execute(f"{alter_database} SET idle_in_transaction_session_timeout = 300000")
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 45000")
    bounded = _w014()
    admin.execute(f"{alter_database} RESET statement_timeout")
    stale = _w014()

    assert bounded == []
    assert len(stale) == 1 and "in this database: statement_timeout: " in stale[0], stale


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(**BOUNDED)
def test_w014_a_bound_only_in_the_connections_options_warns() -> None:
    """Holding (regression). Found: a bound in the connection's ``options`` has source ``client``.
    Expect: it counts as none (PgBouncer does not pass it on): W014 names both bounds, and the hint says why."""
    options = connection.settings_dict.setdefault("OPTIONS", {})
    saved = options.get("options")
    options["options"] = "-c statement_timeout=30000 -c idle_in_transaction_session_timeout=300000"
    try:
        connection.close()
        with override_settings(TOOLHUB=POOLED):
            warnings = [
                message for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"
            ]
        with connection.cursor() as cursor:
            cursor.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'")
            session_value = cursor.fetchone()[0]
    finally:
        if saved is None:
            options.pop("options")
        else:
            options["options"] = saved
        connection.close()

    assert session_value == "30000"  # the premise: the session is bounded, through its options only
    assert len(warnings) == 1
    assert "statement_timeout, idle_in_transaction_session_timeout" in warnings[0].msg
    assert "only in the connection's options does not reach the pool" in (warnings[0].hint or "")


@pytest.mark.postgres
@pytest.mark.django_db
def test_w014_unreadable_hint_names_no_role_as_a_command_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: when the role's bounds could not be read (the database unreachable, the transaction aborted), the
    hint said "Run `manage.py toolhub_db_roles --role the application role`": a command that fails as written
    (three arguments), and nothing about the read that failed.
    Expect: the hint says to make the database reachable as the application role and run the check again, and shows
    the role as a placeholder, not as words to paste."""
    from django.db import OperationalError

    from toolhub import db_pooler

    def unreachable(using: str = "default") -> tuple[str, list[str]]:
        raise OperationalError("connection refused")

    monkeypatch.setattr(db_pooler, "role_unbounded", unreachable)
    with override_settings(TOOLHUB=POOLED):
        warnings = check_pooler_role_bounds()

    assert [warning.id for warning in warnings] == ["toolhub.W014"]
    assert "could not be read (OperationalError)" in warnings[0].msg
    hint = warnings[0].hint or ""
    assert "--role the application role" not in hint, hint
    assert hint.startswith("Make the database reachable as the application role") and "run the check again" in hint
    assert "--role <the application role>" in hint
