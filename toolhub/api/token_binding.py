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
"""

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models.signals import post_save

from toolhub.credentials import password_fingerprint

__all__ = ["install", "token_holds", "tokens_rebind"]


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


def _token_saved(sender: Any, instance: Any, created: bool = False, using: str = "default", **kwargs: Any) -> None:
    """A token made: bound to its user's password as stored (read, not the caller's copy, which may be stale)."""
    if not created:
        return
    from django.contrib.auth import get_user_model

    from toolhub.models import ApiTokenBinding

    stored = get_user_model()._base_manager.using(using).filter(pk=instance.user_id).values_list("password").first()
    fingerprint = password_fingerprint(stored[0] if stored is not None else None)
    # By its key: the admin's proxy answers ``pk`` with the user's id.
    ApiTokenBinding.objects.using(using).bulk_create(
        [ApiTokenBinding(token_id=instance.key, password_fingerprint=fingerprint)],
        update_conflicts=True,
        unique_fields=["token"],
        update_fields=["password_fingerprint"],
    )


def install() -> None:
    """Bind every token made through a save, DRF's model and its admin's proxy alike (a proxy's save names itself)."""
    from rest_framework.authtoken.models import Token, TokenProxy

    for model in (Token, TokenProxy):
        post_save.connect(_token_saved, sender=model, dispatch_uid=f"toolhub.api.token_binding.{model.__name__}")
