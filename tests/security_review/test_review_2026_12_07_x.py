"""Review 2026-12-07 (x): tables named by string instead of by model, under a project's own user model.

Read first: ``toolhub.apps.GOVERNANCE_TABLES``, ``toolhub.governance`` (the stamp's triggers), reviews a and j
(``toolhub.api.token_binding``). Django's ``AUTH_USER_MODEL`` documentation: a custom user model keeps its users in
its own table (``get_user_model()._meta.db_table``, e.g. ``accounts_user``) and, with ``PermissionsMixin``, their
groups and permissions in its own through tables (``accounts_user_groups``, ``accounts_user_user_permissions``);
``auth_user`` and its two through tables are then never created.

Findings:

1. The governance stamp watched the accounts' tables by their names under ``auth.User``: ``auth_user`` (INSERT,
   DELETE, UPDATE OF is_superuser, is_active), ``auth_user_groups``, ``auth_user_user_permissions`` were spelled
   out in ``GOVERNANCE_TABLES`` and ``governance_triggers_install`` silently skips a table that does not exist.
   Under ``AUTH_USER_MODEL = "accounts.User"`` no trigger sat on the user's table or its through tables: a
   deactivation, a superuser bit taken away, a group or a capability removed stamped nothing, and every process
   went on answering from the user facts it had cached (``toolhub.authorization._user_facts``): a deactivated user
   kept calling tools. Fix: ``toolhub.account_tables.account_governance_tables`` names the user model's table,
   its flags' columns and its ``groups``/``user_permissions`` through tables, ``Group``'s and its permissions'
   through table, from ``_meta``; ``governance_watched_tables`` (which the trigger install reads) adds them, and
   ``GOVERNANCE_TABLES`` no longer names any ``auth_`` table. Test:
   ``test_a_custom_user_models_tables_stamp_governance``.
2. A user model without what authorization reads (``is_active``/``is_superuser`` columns, ``groups`` and
   ``user_permissions`` many-to-many fields: e.g. ``AbstractBaseUser`` alone, whose ``is_active`` is a class
   attribute) passed ``manage.py check``: nothing could be watched, and the first call failed on the missing
   fields. Fix: the system check ``toolhub.E008`` (``toolhub.checks.check_user_model``) refuses it, naming what is
   missing, with a hint. Test: ``test_a_user_model_toolhub_cannot_watch_is_refused_by_the_checks``.

Checked and holding:

- Under ``auth.User`` the watched accounts' tables and events are exactly the ones spelled out before
  (``test_holding_the_default_user_model_watches_the_same_tables``).
- ``toolhub.api.token_binding.binding_triggers_install`` already read the user table and ``is_active``'s column
  from ``get_user_model()._meta``: under a custom model its trigger sits on that model's table and a deactivation
  by SQL unbinds the account's key (``test_holding_the_binding_trigger_follows_the_user_model``).
- ``toolhub.api.token_revocation`` connects to ``get_user_model()``; ``toolhub.dbroles`` names only the audit
  tables, from ``_meta``; ``toolhub.builtins.access`` reads ``get_user_model().groups.through``; no migration of
  toolhub, approvals or agents_app names an ``auth_`` table; raw SQL elsewhere (``calls``, ``claims``,
  ``audit_verify``, ``synthetic``, ``rowwrite``) names tables from ``_meta`` (grep of ``"auth_``/``'auth_`` and
  ``db_table``, read). ``Group`` and ``Permission`` are not swappable: ``auth_group`` and
  ``auth_group_permissions`` stay, read from ``Group._meta`` all the same.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group, Permission, User
from django.core.checks import run_checks
from django.db import connection, models
from django.test.utils import isolate_apps
from rest_framework.authtoken.models import Token

from toolhub.api.keys import api_key_issue
from toolhub.api.token_binding import DEACTIVATED, binding_triggers_install
from toolhub.governance import governance_triggers_install, governance_watched_tables
from toolhub.models import ApiTokenBinding

pytestmark = pytest.mark.django_db

OLD_AUTH_TABLES = {
    "auth_group": "INSERT OR UPDATE OR DELETE",
    "auth_user_groups": "INSERT OR UPDATE OR DELETE",
    "auth_user_user_permissions": "INSERT OR UPDATE OR DELETE",
    "auth_group_permissions": "INSERT OR UPDATE OR DELETE",
    "auth_user": "INSERT OR DELETE OR UPDATE OF is_superuser, is_active",
}


@pytest.fixture
def models_() -> Iterator[dict[str, Any]]:
    """A project's own user models, as ``accounts.User`` would be (isolated: the real registry is untouched)."""
    with isolate_apps("tests.security_review"):

        class Account(AbstractBaseUser):
            """A user model with everything toolhub reads, in its own tables, the active flag in its own column."""

            email = models.EmailField(unique=True)
            is_active = models.BooleanField(default=True, db_column="active")
            is_superuser = models.BooleanField(default=False)
            groups = models.ManyToManyField(Group, related_name="+")
            user_permissions = models.ManyToManyField(Permission, related_name="+")
            USERNAME_FIELD = "email"

            class Meta:
                app_label = "security_review"
                db_table = "review_x_account"

        class Bare(AbstractBaseUser):
            """A user model with no rights: ``is_active`` is ``AbstractBaseUser``'s class attribute."""

            email = models.EmailField(unique=True)
            USERNAME_FIELD = "email"

            class Meta:
                app_label = "security_review"
                db_table = "review_x_bare"

        yield {"Account": Account, "Bare": Bare}


#: A row of the custom user model's table, written in SQL as a DBA's script would.
_ADD = "INSERT INTO review_x_account (id, password, email, active, is_superuser) VALUES "


def _stamp() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT stamp FROM toolhub_governanceversion WHERE id = 1")
        return int(cursor.fetchone()[0])


@pytest.mark.postgres
def test_a_custom_user_models_tables_stamp_governance(models_: dict[str, Any], monkeypatch: Any) -> None:
    """Found: under a project's own user model (``accounts_user``), the triggers named ``auth_user`` and its through
    tables, which do not exist there: a user added, deactivated or demoted, a group or permission given or taken
    stamped nothing, so every process kept the user's cached rights (a deactivated user went on calling tools).

    Expect: each such change on the custom model's tables stamps a new governance version; a login's ``last_login``
    does not."""
    account = models_["Account"]
    monkeypatch.setattr("django.contrib.auth.get_user_model", lambda: account)
    with connection.schema_editor() as editor:  # rolled back with the test (PostgreSQL DDL is transactional)
        editor.create_model(account)
    governance_triggers_install(connection)
    groups, perms = account.groups.through._meta.db_table, account.user_permissions.through._meta.db_table
    assert (groups, perms) == ("review_x_account_groups", "review_x_account_user_permissions")
    group = Group.objects.create(name="review-x")
    permission = Permission.objects.first()
    assert permission is not None

    steps = [
        f"{_ADD}(9001, '', 'a@x', true, true)",
        ("UPDATE review_x_account SET active = false WHERE id = 9001"),
        ("UPDATE review_x_account SET is_superuser = false WHERE id = 9001"),
        (f"INSERT INTO {groups} (account_id, group_id) VALUES (9001, {group.pk})"),
        (f"DELETE FROM {groups} WHERE account_id = 9001"),
        (f"INSERT INTO {perms} (account_id, permission_id) VALUES (9001, {permission.pk})"),
        (f"DELETE FROM {perms} WHERE account_id = 9001"),
        ("DELETE FROM review_x_account WHERE id = 9001"),
    ]
    moved = []
    for sql in steps:
        before = _stamp()
        with connection.cursor() as cursor:
            cursor.execute(sql)
        moved.append(_stamp() != before)
    assert moved == [True] * len(steps)

    with connection.cursor() as cursor:
        cursor.execute(f"{_ADD}(9002, '', 'b@x', true, false)")
        before = _stamp()
        cursor.execute("UPDATE review_x_account SET last_login = now() WHERE id = 9002")
    assert _stamp() == before


def test_a_user_model_toolhub_cannot_watch_is_refused_by_the_checks(models_: dict[str, Any], monkeypatch: Any) -> None:
    """Found: a user model without ``is_active``/``is_superuser`` columns, ``groups`` or ``user_permissions``
    (``AbstractBaseUser`` alone) passed ``manage.py check``: nothing could watch its rights, and the first call
    failed on fields that are not there.

    Expect: ``toolhub.E008`` names what is missing, with a hint; a model with them all passes."""
    monkeypatch.setattr("django.contrib.auth.get_user_model", lambda: models_["Bare"])
    errors = [message for message in run_checks() if message.id == "toolhub.E008"]
    assert len(errors) == 1
    assert "no is_superuser column" in errors[0].msg and "no groups many-to-many field" in errors[0].msg
    assert "no is_active column" in errors[0].msg and errors[0].hint
    assert len(errors[0].msg) < 400

    monkeypatch.setattr("django.contrib.auth.get_user_model", lambda: models_["Account"])
    assert not [message for message in run_checks() if message.id == "toolhub.E008"]


def test_holding_the_default_user_model_watches_the_same_tables() -> None:
    """Found: nothing (holding): under ``auth.User`` the accounts' tables and events are the ones spelled out before.

    Expect: exactly ``auth_user`` (rows and the two flags) and the four many-to-many/group tables."""
    watched = governance_watched_tables()
    assert {table: events for table, events in watched.items() if table.startswith("auth_")} == OLD_AUTH_TABLES
    assert User._meta.db_table == "auth_user"


@pytest.mark.postgres
def test_holding_the_binding_trigger_follows_the_user_model(
    models_: dict[str, Any], monkeypatch: Any, alice: User
) -> None:
    """Found: nothing (holding): the API key's unbinding on deactivation already named the user table and its active
    column from ``get_user_model()._meta``.

    Expect: under a custom model, its trigger sits on that model's table and a deactivation written in SQL there
    unbinds the key of the account with that id."""
    key = api_key_issue(alice)
    account = models_["Account"]
    monkeypatch.setattr("django.contrib.auth.get_user_model", lambda: account)
    with connection.schema_editor() as editor:
        editor.create_model(account)
    assert binding_triggers_install(connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"{_ADD}(%s, '', 'a@x', true, false)",
            [alice.pk],
        )
        cursor.execute("UPDATE review_x_account SET active = false WHERE id = %s", [alice.pk])
    token = Token.objects.get(user=alice)
    assert ApiTokenBinding.objects.get(token=token).password_fingerprint == DEACTIVATED
    assert key
