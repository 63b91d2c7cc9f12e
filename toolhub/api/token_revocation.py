"""API tokens end with the password and the account they were made for.

A password is what an administrator resets when an account is feared taken; a token made or copied by the intruder
must not outlive it. A deactivated account's token was refused (``token_owner``) but kept, so reactivating the
account brought the same key back. So a user saved with a new password (``set_password``: the admin's password form,
``changepassword``, the user's own form) or inactive loses every token, in the save's transaction, each deletion a
``governance.deleted`` event in the trail of the user's tenants (actor ``revocation:<why>``; never the key) as the
admin's Tokens page records one. A save that sets no password (a login's ``last_login``, an e-mail) keeps them; an
administrator makes a new token in the admin's Tokens when the person needs one.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_save

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
        model._base_manager.using(using).filter(key__in=[token.key for token in tokens]).delete()
    return len(tokens)


def _user_saved(sender: Any, instance: Any, created: bool = False, raw: bool = False, **kwargs: Any) -> None:
    """A user saved with a new password (``set_password`` leaves ``_password`` set until the save ends) or inactive."""
    if created or raw:
        return
    if getattr(instance, "_password", None) is not None:
        tokens_revoke(instance, why=PASSWORD_CHANGED, using=kwargs.get("using") or "default")
    elif not instance.is_active:
        tokens_revoke(instance, why=DEACTIVATED, using=kwargs.get("using") or "default")


def install() -> None:
    """Revoke a user's tokens whenever the user is saved with a new password or inactive."""
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="toolhub.api.token_revocation")
