"""An API token holds only under the password it was issued under, whatever wrote the password since.

Revocation at a user's save (``toolhub.api.token_revocation``) deletes the tokens a new password ends, but a password
written without a save (``QuerySet.update``, ``bulk_update`` after ``set_unusable_password``, SQL: what an incident
responder's script does to the accounts feared taken) sends no signal, and the token stayed good. So each token is
bound when it is made (any save creating it: ``api_key_issue``, the admin's Tokens, ``loaddata``) to the
``toolhub.credentials.password_fingerprint`` of its user's stored password, in an ``ApiTokenBinding`` row read with the
token (one join: no statement more), and ``token_owner`` refuses one whose user's password is another now. A token
row with no binding (``bulk_create``, SQL) authenticates no one, as a key stored as no digest does.

Django's rehash of a password at a login is no new password (as for revocation): that save rebinds the user's tokens
bound to the hash it replaces (:func:`tokens_rebind`), not one a reset by ``update`` ended. One unusable password for
another is none either: every unusable password has one fingerprint.

A deactivation ends the tokens too, whatever writes it: a save deletes them (``toolhub.api.token_revocation``), and
``QuerySet.update`` or SQL, which no signal sees and whose reactivation by ``update`` leaves the row as it was, is seen
by a trigger on the user table (:func:`binding_triggers_install`, installed after each ``migrate``) that binds the
account's tokens to no password when it turns inactive, or when its row is replaced by SQL with an inactive one:
refused from then on, reactivated or not (an administrator makes a new one in the admin's Tokens).
"""

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.signals import post_save

from toolhub.credentials import password_fingerprint

__all__ = [
    "binding_triggers_drop",
    "binding_triggers_install",
    "binding_triggers_migrating",
    "install",
    "token_holds",
    "tokens_rebind",
]

#: The trigger (and, on PostgreSQL, its function) ending a deactivated account's tokens.
TRIGGER = "toolhub_tokens_unbind"
#: Its twin on a user row inserted inactive: the row replaced by SQL (``DELETE`` then ``INSERT`` of the same id in one
#: transaction, as a restore of the row does; SQLite's ``INSERT OR REPLACE``) keeps its tokens (the foreign key is
#: checked at the commit, when the id is there again) and fires no update.
TRIGGER_INSERTED = "toolhub_tokens_unbind_inserted"

#: What a deactivated account's tokens are bound to: no password's fingerprint (64 hex characters, or empty), so
#: they are refused, no rehash rebinds them, and a dump of them (``dumpdata``) loads them as refused as they were.
DEACTIVATED = "!deactivated"


def token_holds(token: Any) -> bool:
    """Whether ``token`` (read with ``select_related("user", "binding")``) was issued under its user's password now."""
    try:
        bound = token.binding.password_fingerprint
    except ObjectDoesNotExist:
        return False
    return bool(bound == password_fingerprint(token.user.password))


def tokens_rebind(user: Any, *, replaced: str, using: str = "default") -> int:
    """Bind ``user``'s tokens bound to the hash ``replaced`` to its password as stored now (a rehash); how many.

    Only those: a token bound to another password (ended by a reset written by ``update``) stays ended when the reset
    password is rehashed at a login.
    """
    from toolhub.models import ApiTokenBinding

    fingerprint = password_fingerprint(user.password)
    bindings = ApiTokenBinding.objects.using(using).filter(
        token__user_id=user.pk, password_fingerprint=password_fingerprint(replaced)
    )
    return int(bindings.update(password_fingerprint=fingerprint))


def _token_saved(
    sender: Any, instance: Any, created: bool = False, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    """A token made: bound to its user's password as stored (read, not the caller's copy, which may be stale).

    A token loaded (``loaddata``: ``raw``) keeps a binding already loaded with it: a dump may list the bindings
    before the tokens (``dumpdata toolhub.apitokenbinding authtoken.token``), and binding the token afresh over
    the one loaded gave a key ended by a deactivation or a password reset back its account.
    """
    if not created:
        return
    from django.contrib.auth import get_user_model

    from toolhub.models import ApiTokenBinding

    stored = get_user_model()._base_manager.using(using).filter(pk=instance.user_id).values_list("password").first()
    fingerprint = password_fingerprint(stored[0] if stored is not None else None)
    # By its key: the admin's proxy answers ``pk`` with the user's id.
    binding = ApiTokenBinding(token_id=instance.key, password_fingerprint=fingerprint)
    if raw:
        ApiTokenBinding.objects.using(using).bulk_create([binding], ignore_conflicts=True)
        return
    ApiTokenBinding.objects.using(using).bulk_create(
        [binding], update_conflicts=True, unique_fields=["token"], update_fields=["password_fingerprint"]
    )


def install() -> None:
    """Bind every token made through a save, DRF's model and its admin's proxy alike (a proxy's save names itself)."""
    from rest_framework.authtoken.models import Token, TokenProxy

    for model in (Token, TokenProxy):
        post_save.connect(_token_saved, sender=model, dispatch_uid=f"toolhub.api.token_binding.{model.__name__}")


def binding_triggers_install(connection: BaseDatabaseWrapper) -> bool:
    """Create (or replace) the triggers unbinding an account's tokens when it turns inactive; whether they are there.

    Row-level, on the user's ``is_active`` going from true to false only (a login's ``last_login``, a save keeping
    the flag fire nothing), and on a row inserted inactive (:data:`TRIGGER_INSERTED`: a new account has no token, a
    row replaced by SQL keeps its own): they bind the account's tokens to :data:`DEACTIVATED`, in the statement's
    transaction (not deleting their bindings: a token with none is bound afresh when ``loaddata`` restores it).
    Installed by migration 0055 (PostgreSQL) and again after each ``migrate`` (as the governance stamps are), so a
    rebuild of the user table (SQLite) gets them back; nothing while the tables named are not all there (a migration
    back). On SQLite they are away while migrations run (:func:`binding_triggers_migrating`); accounts inactive before
    them are ended by migration 0057.
    """
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from toolhub.models import ApiTokenBinding

    user = get_user_model()._meta
    if not any(field.name == "is_active" for field in user.concrete_fields):
        return False  # a custom user model without the flag: nothing deactivates it
    tables = {user.db_table, Token._meta.db_table, ApiTokenBinding._meta.db_table}
    if not tables <= set(connection.introspection.table_names()):
        return False
    q = connection.ops.quote_name
    token, binding = Token._meta, ApiTokenBinding._meta
    active = q(user.get_field("is_active").column)
    unbind = (
        f"UPDATE {q(binding.db_table)} SET {q(binding.get_field('password_fingerprint').column)} = '{DEACTIVATED}' "
        f"WHERE {q(binding.get_field('token').column)} IN "
        f"(SELECT {q(token.pk.column)} FROM {q(token.db_table)} "
        f"WHERE {q(token.get_field('user').column)} = NEW.{q(user.pk.column)})"
    )
    when = f"OLD.{active} AND NOT NEW.{active}"
    on = f"AFTER UPDATE OF {active} ON {q(user.db_table)} FOR EACH ROW"
    inserted_when = f"NOT NEW.{active}"
    inserted_on = f"AFTER INSERT ON {q(user.db_table)} FOR EACH ROW"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT current_schema()")
            schema = q(cursor.fetchone()[0])
            # Its own schema only (``pg_temp`` last), as the governance and audit triggers' functions.
            cursor.execute(
                f"CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger AS $$ BEGIN {unbind}; RETURN NULL; END; $$ "
                f"LANGUAGE plpgsql SET search_path = {schema}, pg_temp"
            )
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {q(user.db_table)}")
            cursor.execute(f"CREATE TRIGGER {TRIGGER} {on} WHEN ({when}) EXECUTE FUNCTION {TRIGGER}()")
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER_INSERTED} ON {q(user.db_table)}")
            cursor.execute(
                f"CREATE TRIGGER {TRIGGER_INSERTED} {inserted_on} WHEN ({inserted_when}) EXECUTE FUNCTION {TRIGGER}()"
            )
        elif connection.vendor == "sqlite":
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
            cursor.execute(f"CREATE TRIGGER {TRIGGER} {on} WHEN {when} BEGIN {unbind}; END")
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER_INSERTED}")
            cursor.execute(f"CREATE TRIGGER {TRIGGER_INSERTED} {inserted_on} WHEN {inserted_when} BEGIN {unbind}; END")
        else:
            return False
    return True


def binding_triggers_migrating(connection: BaseDatabaseWrapper) -> None:
    """``pre_migrate`` (SQLite): no trigger while migrations run there; ``post_migrate`` installs it after the run.

    Django rebuilds a SQLite table it alters (create ``new__``, copy, drop, rename), and SQLite's rename re-reads every
    trigger: the user table's, naming the token or bindings table just dropped, fails the rename, and ``migrate``
    stops (a migration of ``ApiTokenBinding``, or a DRF upgrade altering ``Token``). No request is served by a
    SQLite database while it migrates; PostgreSQL alters in place and keeps it.
    """
    if connection.vendor == "sqlite":
        binding_triggers_drop(connection)


def binding_triggers_drop(connection: BaseDatabaseWrapper) -> None:
    """Drop the triggers (and their function): before its bindings' table goes, on a migration back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}() CASCADE")  # and both triggers
        elif connection.vendor == "sqlite":
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER_INSERTED}")
