"""API tokens and console sessions end with the password and the account they were made for.

A password is what an administrator resets when an account is feared taken; a token made or copied by the intruder
must not outlive it. A deactivated account's token was refused (``token_owner``) but kept, so reactivating the
account brought the same key back. So a user saved inactive or with another password loses every token, in the
save's transaction, each deletion a ``governance.deleted`` event in the trail of the user's tenants (actor
``revocation:<why>``; never the key) as the admin's Tokens page records one.

"Another password" is any save that writes a hash other than the stored one: ``set_password`` (the admin's password
form, ``changepassword``, the user's own form), ``set_unusable_password`` (the admin form's "usable password: no",
which locks a taken account out of password sign-in), a hash written as is, ``loaddata`` (a raw save: a restore
or a copy is the account as it now is). Not another password: Django's hash upgrade at a login (``check_password``
rewrites only ``password``, ``set_password``'s mark cleared, usable before and after) and one unusable hash for
another (each ``set_unusable_password`` draws a new one; an account signing in by token only keeps its token). A
save that writes no password (a login's ``last_login``, an e-mail) keeps them; an administrator makes a new token
in the admin's Tokens when the person needs one.

``QuerySet.update`` (a shell, a script, raw SQL) sends no signal, so what it deactivates or unstaffs keeps its
sessions, refused only while that lasts; its tokens are ended by a trigger as it turns inactive
(``toolhub.api.token_binding``: bound to no password, refused once active again), their rows left. The save that
gives the account back what it lost revokes them then: one making an inactive account active deletes its tokens
(left from a deactivation, or made while it could not use them), one giving the console back (active staff, stored
as not) deletes its sessions (the console's login signs in active staff only, so any session left is one it issued
before). A password written by ``update`` is seen by no save after it (the stored hash is already the new one): its
sessions end by Django's check of their hash, its tokens by their binding to the password they were made under
(``toolhub.api.token_binding``; a save that rehashes the same password at a login rebinds them).

A deleted account's sessions go with it (``pre_delete``, in the deletion's transaction; its tokens go by cascade):
left until they expired, they signed in again once the account was restored with the same id and password hash
(``loaddata`` of a backup). One deletion reads the live sessions once however many users it deletes (the admin's
"delete selected" of 1,000 users read and decoded them 1,000 times, tens of seconds in one transaction).

Sessions ended are recorded as tokens revoked are: one ``login.sessions_ended`` event in the trail of each of the
account's tenants (the platform's when it has none), naming the account, how many sessions and why (actor
``revocation:<why>``: ``password-changed``, ``console-lost``, ``account-deleted``), never a key or its digest.

Console sessions likewise: Django refuses a session whose password hash is no longer the account's, or whose account
is inactive or (``toolhub.api.sessions``, the admin) no longer staff, but only while that lasts: the row was kept,
and reactivating the account, or making it staff again, signed the old session in again. So a save writing another
password, or taking the console away (an active staff account saved inactive or not staff), deletes the account's
sessions in the same transaction (``toolhub.session_store.sessions_end``); the one changing its own password stays
signed in (``update_session_auth_hash`` saves it under a new key).
"""

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import get_hasher, identify_hasher, is_password_usable
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save

from toolhub.api.token_binding import tokens_rebind
from toolhub.audit import audit_append
from toolhub.governance_trail import USER_TENANTS, governance_append, governance_tenants
from toolhub.session_store import sessions_end, sessions_signed_in

__all__ = ["install", "sessions_revoke", "tokens_revoke"]

PASSWORD_CHANGED = "password-changed"
DEACTIVATED = "deactivated"
#: Why sessions end besides a new password: the console taken away (or given back, ending those left from before).
CONSOLE_LOST = "console-lost"
ACCOUNT_DELETED = "account-deleted"


def tokens_revoke(user: Any, *, why: str, using: str = "default") -> int:
    """Delete ``user``'s API tokens, each recorded as the Tokens page records a deletion; how many there were."""
    from django.contrib import admin
    from rest_framework.authtoken.models import Token

    from toolhub.admin_governance_audit import governing_page

    found = governing_page(Token, admin.site)  # the Tokens page's model (DRF's proxy), so events name rows as it does
    model = Token if found is None else found[0]
    tokens = list(model._base_manager.using(using).select_related("user").filter(user_id=user.pk))
    if not tokens:
        return 0
    with transaction.atomic(using=using):
        for token in tokens:
            if found is not None:
                binding = found[1].audit_binding()
                governance_append(
                    token,
                    "deleted",
                    actor=f"revocation:{why}",
                    tenants=governance_tenants(token, fields=binding.fields, lookups=binding.lookups),
                    excluded=binding.excluded,
                    accounts=binding.accounts,
                )
        # Through the concrete model: DRF's proxy answers ``pk`` with the user's id, so a delete that collects rows
        # (a token's ``ApiTokenUse`` goes with it) would match the key column against user ids and delete nothing.
        Token._base_manager.using(using).filter(key__in=[token.key for token in tokens]).delete()
    return len(tokens)


def sessions_revoke(
    user: Any, *, why: str, using: str = "default", signed_in: dict[str, list[str]] | None = None
) -> int:
    """End ``user``'s console sessions (``sessions_end``), recorded in its tenants' trails when any ended; how many.

    In the caller's transaction when there is one (no savepoint: a user with no session costs no statement when
    ``signed_in``, the sessions read once for a deletion of many, is given).
    """
    with transaction.atomic(using=using, savepoint=False):
        ended = sessions_end(user, using=using, signed_in=signed_in)
        if ended:
            data = {"user_id": user.pk, "username": user.get_username(), "sessions": ended}
            for tenant in governance_tenants(user, fields=(), lookups=USER_TENANTS) or [""]:
                audit_append(event_type="login.sessions_ended", actor=f"revocation:{why}", data=data, tenant=tenant)
    return ended


#: Set by :func:`_user_saving`: whether the save writes another password than the stored one.
_NEW_PASSWORD = "_toolhub_new_password"


def _another_password(stored: str | None, written: str, *, hash_upgrade: bool) -> bool:
    """Whether writing ``written`` over ``stored`` changes the password (see the module's docstring)."""
    if stored is None or stored == written:
        return False
    if not is_password_usable(stored) and not is_password_usable(written):
        return False  # one "no password" for another
    return not (hash_upgrade and _rehash(stored, written))


def _rehash(stored: str, written: str) -> bool:
    """Whether ``written`` over ``stored`` is one Django's login would make (``verify_password``'s ``must_update``).

    The stored hash is one it upgrades (another hasher than the preferred one, or the preferred one's outdated work
    factor or salt) and the written one is the preferred hasher's: a new password written as a hash over a current
    one (``save(update_fields=["password"])`` in a script) is a new password, as the same hash by ``update`` is.
    """
    if not (is_password_usable(stored) and is_password_usable(written)):
        return False
    preferred = get_hasher("default")
    try:
        hasher, upgraded = identify_hasher(stored), identify_hasher(written)
    except ValueError:  # a hasher no longer installed: Django upgrades none
        return False
    outdated = hasher.algorithm != preferred.algorithm or preferred.must_update(stored)
    return bool(outdated and upgraded.algorithm == preferred.algorithm)


#: Set by :func:`_user_saving`: the hash a save replaces with the same password hashed anew (Django's rehash at a
#: login), or ``None``.
_REHASHED = "_toolhub_rehashed"

#: Set by :func:`_user_saving`: whether the save takes the console away (active staff before, not after).
_CONSOLE_LOST = "_toolhub_console_lost"
#: Set by :func:`_user_saving`: whether the save gives the console back (not active staff before, active staff after).
_CONSOLE_REGAINED = "_toolhub_console_regained"
#: Set by :func:`_user_saving`: whether the save makes an inactive account active.
_REACTIVATED = "_toolhub_reactivated"


def _console(active: Any, staff: Any) -> bool:
    """Whether an account with these flags may sign in to the console (Django's admin: active staff)."""
    return bool(active and staff)


def _user_saving(sender: Any, instance: Any, raw: bool = False, update_fields: Any = None, **kwargs: Any) -> None:
    """Whether the save writes another password, takes the console away, gives it back or reactivates the account.

    The stored row is read once, and only when the save writes the password or the flags (never at a login's save).
    """
    marked = getattr(instance, "_password", None) is not None  # ``set_password``, until the save ends
    writes = set(update_fields) if update_fields is not None else None
    reads_password = not marked and (writes is None or "password" in writes)
    reads_flags = writes is None or bool(writes & {"is_active", "is_staff"})
    console = _console(instance.is_active, getattr(instance, "is_staff", False))
    new, lost, regained, reactivated = marked, False, False, False
    rehashed: str | None = None
    if instance.pk is not None and (reads_password or reads_flags):
        stored = sender._base_manager.using(kwargs.get("using") or "default").filter(pk=instance.pk)
        row = stored.values_list("password", "is_active", "is_staff").first()
        if row is not None:
            if reads_password:
                new = _another_password(row[0], instance.password, hash_upgrade=not raw and writes == {"password"})
                rehashed = row[0] if not new and row[0] != instance.password else None
            if reads_flags:
                lost = not console and _console(row[1], row[2])
                regained = console and not _console(row[1], row[2])
                reactivated = bool(instance.is_active and not row[1])
    setattr(instance, _NEW_PASSWORD, new)
    setattr(instance, _REHASHED, rehashed)
    setattr(instance, _CONSOLE_LOST, lost)
    setattr(instance, _CONSOLE_REGAINED, regained)
    setattr(instance, _REACTIVATED, reactivated)


def _user_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """A user saved with another password (:func:`_user_saving`), inactive or given back what it had lost.

    ``loaddata``'s raw saves included.
    """
    if created:
        return
    using = kwargs.get("using") or "default"
    new_password = getattr(instance, _NEW_PASSWORD, False)
    if new_password:
        tokens_revoke(instance, why=PASSWORD_CHANGED, using=using)
    elif not instance.is_active or getattr(instance, _REACTIVATED, False):
        tokens_revoke(instance, why=DEACTIVATED, using=using)
    replaced = getattr(instance, _REHASHED, None)
    if replaced is not None:  # the same password: the tokens bound to the hash replaced still hold (``token_binding``)
        tokens_rebind(instance, replaced=replaced, using=using)
    if new_password:
        sessions_revoke(instance, why=PASSWORD_CHANGED, using=using)
    elif getattr(instance, _CONSOLE_LOST, False) or getattr(instance, _CONSOLE_REGAINED, False):
        sessions_revoke(instance, why=CONSOLE_LOST, using=using)


#: Set on a deletion's origin (the ``QuerySet`` or user deleted) by :func:`_deletion_sessions`, until its end.
_DELETION_SESSIONS = "_toolhub_deletion_sessions"


@dataclass
class _DeletionSessions:
    """The live sessions read for one deletion, and the users whose ``pre_delete`` took theirs from them."""

    using: str
    signed_in: dict[str, list[str]]
    seen: set[Any] = field(default_factory=set)


def _deletion_sessions(origin: Any, instance: Any, using: str) -> dict[str, list[str]] | None:
    """The live sessions by user, read once for a deletion however many users it deletes (``None``: read per user).

    The collector sends every ``pre_delete`` of one deletion before any ``post_delete``, all with its origin; the
    read is kept on the origin until the first ``post_delete`` (:func:`_user_deleted`). A user seen already is
    another deletion (one retried through the same ``QuerySet`` after failing): the sessions are read again.
    """
    if origin is None:
        return None
    kept = getattr(origin, _DELETION_SESSIONS, None)
    if not isinstance(kept, _DeletionSessions) or kept.using != using or instance.pk in kept.seen:
        kept = _DeletionSessions(using, sessions_signed_in(using=using))
        try:
            setattr(origin, _DELETION_SESSIONS, kept)
        except (AttributeError, TypeError):  # an origin that keeps no attribute: each user reads its own
            return None
    kept.seen.add(instance.pk)
    return kept.signed_in


def _user_deleting(sender: Any, instance: Any, origin: Any = None, **kwargs: Any) -> None:
    """A user deleted: its sessions go in the deletion's transaction (its tokens go by cascade)."""
    using = kwargs.get("using") or "default"
    signed_in = _deletion_sessions(origin, instance, using)
    sessions_revoke(instance, why=ACCOUNT_DELETED, using=using, signed_in=signed_in)


def _user_deleted(sender: Any, instance: Any, origin: Any = None, **kwargs: Any) -> None:
    """A deletion's rows are gone: the sessions read for it are not kept for another."""
    if origin is not None and getattr(origin, _DELETION_SESSIONS, None) is not None:
        delattr(origin, _DELETION_SESSIONS)


def install() -> None:
    """Revoke a user's tokens and end its sessions as the module says: at the saves above and at its deletion."""
    pre_save.connect(_user_saving, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
    pre_delete.connect(_user_deleting, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
    post_delete.connect(_user_deleted, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
