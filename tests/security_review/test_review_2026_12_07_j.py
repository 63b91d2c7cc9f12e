"""Review 2026-12-07 (j): review a's trigger ending a deactivated account's API keys, tried from every side.

Read first: review a (2026-12-07) and ``toolhub.api.token_binding`` (``binding_triggers_install``), migration 0055,
``toolhub.apps._install_binding_triggers``.

Findings:

1. The upgrade ended only deactivations to come: an account deactivated by ``QuerySet.update`` or SQL before
   migration 0055 (the very case review a fixed, on every database upgraded from before it), or while migrated back
   to 0054, kept its key bound to its password (0052 bound it so), and a reactivation by ``update`` after the
   upgrade gave it back (200). Fix: migration 0057 binds the keys of every account inactive when it runs to
   ``DEACTIVATED``, as the trigger would have (again after a migration back past it). Test:
   ``test_an_upgrade_ends_the_keys_of_accounts_already_deactivated_by_update``.
2. On SQLite any later migration altering ``ApiTokenBinding`` or DRF's ``Token`` (a DRF upgrade) stopped
   ``migrate``: "error in trigger toolhub_tokens_unbind: no such table: main.toolhub_apitokenbinding" (Django's
   rebuild drops the table then renames ``new__``; SQLite's rename re-reads every trigger). Fix:
   ``token_binding.binding_triggers_migrating`` (``pre_migrate``) drops it on SQLite, 0055 leaves the SQLite install
   to ``post_migrate``, which installs it after the run as before. Test:
   ``test_a_later_migration_rebuilding_the_bindings_table_runs_and_the_trigger_is_back``.

Checked and holding:

- A rebuild of ``auth_user`` itself on SQLite drops the trigger with the table; ``post_migrate`` (sent after every
  ``migrate``, whatever app it names, and after ``flush``) installs it again before any request (read).
- ``flush``: TRUNCATE (PostgreSQL) or DELETE fire no UPDATE trigger; ``post_migrate`` follows (read). Test databases:
  pytest-django's ``--create-db`` and reuse both run ``migrate`` (this file's runs, SQLite and PostgreSQL).
- One transaction: a token made then its account deactivated by ``update`` is ended (its binding is inserted by
  the token's ``post_save``, before); deactivated first then a token made: bound to the password, the README's
  "a token made after that holds".
- A token issued while the account is inactive, then the account reactivated by ``update``: it holds, as the
  README says ("a token made after that holds"); reactivated by a save it is deleted (``token_revocation``).
- The application role (``toolhub.dbroles``): the trigger's function runs with the writer's rights; the role holds
  SELECT, INSERT, UPDATE, DELETE on ``authtoken_token`` and ``toolhub_apitokenbinding`` (``DATA_PRIVILEGES``): in a
  probe on PostgreSQL (``SET ROLE`` to a role ``toolhub_db_roles`` made, tests/audit/conftest.py's fixtures) its
  ``update(is_active=False)`` bound alice's key to ``!deactivated``. ``CREATE OR REPLACE FUNCTION`` by a role not
  owning the function fails as the governance triggers' does (same deployment rule: migrate as the owner; read).
- search_path: the function names its tables in the schema it was installed in, ``pg_temp`` last (read).
- Statement counts: review a's, gj's and fw's pins and ``tests/api/test_token_use.py`` pass with both fixes (the
  trigger adds no Django query to ``token_owner`` or the re-read).
"""

import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.core.management.sql import emit_post_migrate_signal, emit_pre_migrate_signal
from django.db import connection
from rest_framework.test import APIClient

from toolhub.api.keys import api_key_issue
from toolhub.api.token_binding import binding_triggers_drop
from toolhub.models import ApiTokenBinding

pytestmark = pytest.mark.django_db


def _rest_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(client.get("/api/v1/calls/").status_code)


def _migrate_forward(name: str) -> None:
    """Run migration ``name``'s forward RunPython operations on the test database, as ``migrate`` does."""
    migration = importlib.import_module(f"toolhub.migrations.{name}").Migration
    for operation in migration.operations:
        operation.code(django_apps, SimpleNamespace(connection=connection))


def test_an_upgrade_ends_the_keys_of_accounts_already_deactivated_by_update(alice: User) -> None:
    """Found: an account deactivated by ``QuerySet.update`` before migration 0055 (or while migrated back to 0054)
    kept its key bound to its password: 0055 installed the trigger for deactivations to come only, so reactivated by
    ``update`` after the upgrade the key answered 200 again, the very case review a fixed.

    Expect: the upgrade ends the keys of accounts inactive when it runs: refused once reactivated by ``update``."""
    key = api_key_issue(alice)
    binding_triggers_drop(connection)  # the database before 0055 (or migrated back to 0054)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    _migrate_forward("0055_api_token_unbind_on_deactivation")
    _migrate_forward("0057_api_token_unbind_inactive")
    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert _rest_status(key) == 401


@pytest.mark.django_db(transaction=True)  # a schema change, as a migration makes it (SQLite: outside a transaction)
def test_a_later_migration_rebuilding_the_bindings_table_runs_and_the_trigger_is_back(alice: User) -> None:
    """Found: on SQLite a later migration altering ``ApiTokenBinding`` (or DRF's ``Token``: an upgrade of DRF) failed
    with "error in trigger toolhub_tokens_unbind: no such table: main.toolhub_apitokenbinding": Django rebuilds the
    table (create ``new__``, copy, drop, rename) and SQLite's rename re-reads every trigger, the user table's naming
    the table just dropped; ``migrate`` stopped there, and the trigger 0055 installed earlier in the same run was in
    its way too.

    Expect: the run goes through (the trigger is away while migrations run) and is back after it: a deactivation and
    reactivation by ``update`` end the key."""
    key = api_key_issue(alice)
    emit_pre_migrate_signal(verbosity=0, interactive=False, db=connection.alias)
    _migrate_forward("0055_api_token_unbind_on_deactivation")  # an upgrade applying 0055 and a later one in one run
    old = ApiTokenBinding._meta.get_field("password_fingerprint")
    new = old.clone()
    new.set_attributes_from_name(old.name)
    new.model = ApiTokenBinding
    new.max_length = 65
    with connection.schema_editor() as editor:
        editor.alter_field(ApiTokenBinding, old, new)  # SQLite: the table rebuilt
    with connection.schema_editor() as editor:
        editor.alter_field(ApiTokenBinding, new, old)
    emit_post_migrate_signal(verbosity=0, interactive=False, db=connection.alias)
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(is_active=False)
    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert _rest_status(key) == 401
