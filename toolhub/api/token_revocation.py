"""API tokens end with the password and the account they were made for.

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
in the admin's Tokens when the person needs one. ``QuerySet.update`` sends no signal: nothing in toolhub changes a
password or deactivates an account that way.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import is_password_usable
from django.db import transaction
from django.db.models.signals import post_save, pre_save

from toolhub.governance_trail import governance_append, governance_tenants

__all__ = ["install", "tokens_revoke"]

PASSWORD_CHANGED = "password-changed"
DEACTIVATED = "deactivated"


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


#: Set by :func:`_user_saving`: whether the save writes another password than the stored one.
_NEW_PASSWORD = "_toolhub_new_password"


def _another_password(stored: str | None, written: str, *, hash_upgrade: bool) -> bool:
    """Whether writing ``written`` over ``stored`` changes the password (see the module's docstring)."""
    if stored is None or stored == written:
        return False
    if not is_password_usable(stored) and not is_password_usable(written):
        return False  # one "no password" for another
    return not (hash_upgrade and is_password_usable(stored) and is_password_usable(written))


def _user_saving(sender: Any, instance: Any, raw: bool = False, update_fields: Any = None, **kwargs: Any) -> None:
    """Before a save writing a user's password, whether it is another one (the stored hash read once, only then)."""
    marked = getattr(instance, "_password", None) is not None  # ``set_password``, until the save ends
    writes_password = update_fields is None or "password" in update_fields
    new = marked
    if not marked and writes_password and instance.pk is not None:
        stored = sender._base_manager.using(kwargs.get("using") or "default").filter(pk=instance.pk)
        new = _another_password(
            stored.values_list("password", flat=True).first(),
            instance.password,
            hash_upgrade=not raw and update_fields is not None and set(update_fields) == {"password"},
        )
    setattr(instance, _NEW_PASSWORD, new)


def _user_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """A user saved with another password (:func:`_user_saving`) or inactive, ``loaddata``'s raw saves included."""
    if created:
        return
    if getattr(instance, _NEW_PASSWORD, False):
        tokens_revoke(instance, why=PASSWORD_CHANGED, using=kwargs.get("using") or "default")
    elif not instance.is_active:
        tokens_revoke(instance, why=DEACTIVATED, using=kwargs.get("using") or "default")


def install() -> None:
    """Revoke a user's tokens whenever the user is saved with another password or inactive."""
    pre_save.connect(_user_saving, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
