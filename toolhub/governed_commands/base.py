"""The mixin that runs a command's ``handle`` with its writes to governing rows recorded."""

from typing import Any

from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.db import models
from rest_framework.authtoken.models import Token

from toolhub.governance_trail import USER_TENANTS, Binding, command_actor, governance_recording

__all__ = [
    "ACCOUNTS",
    "LOGIN_ATTEMPTS",
    "LOGIN_ATTEMPT_ACCOUNTS",
    "LOGIN_ATTEMPT_EXCLUDED",
    "TOKENS",
    "GovernedCommand",
]

#: A login attempt's request data may hold the typed password (axes keeps POST data when configured to).
LOGIN_ATTEMPT_EXCLUDED: tuple[str, ...] = ("password", "post_data", "get_data")
#: A login attempt's username is whatever was typed: kept only when it is an account's (as the lockout event does).
LOGIN_ATTEMPT_ACCOUNTS: tuple[str, ...] = ("username",)


#: People's accounts: in the chains of their tenants, never their password's hash.
ACCOUNTS: dict[type[models.Model], Binding] = {get_user_model(): Binding(lookups=USER_TENANTS)}


#: API tokens: in the chains of their user's tenants, never their key.
TOKENS: dict[type[models.Model], Binding] = {Token: Binding(lookups=(f"user__{USER_TENANTS[0]}",))}

#: Login lockouts: a login attempt names no tenant, so the platform's chain, as the admin's deletion of one.
LOGIN_ATTEMPTS: dict[type[models.Model], Binding] = {
    AccessAttempt: Binding(excluded=LOGIN_ATTEMPT_EXCLUDED, accounts=LOGIN_ATTEMPT_ACCOUNTS)
}


class GovernedCommand:
    """Mixed into a command (before the original): its ``handle`` runs inside one recorded transaction."""

    def governed(self) -> dict[type[models.Model], Binding]:
        """The models whose rows this command's writes are recorded for."""
        raise NotImplementedError

    def handle(self, *args: Any, **options: Any) -> Any:
        with governance_recording(actor=command_actor(), watched=self.governed()):
            return super().handle(*args, **options)  # type: ignore[misc]
