"""DRF's ``drf_create_token``, its token created or replaced recorded (``governance.added`` / ``deleted``).

The token table holds each key's digest (``toolhub.api.keys``), so the command prints a key only when it makes one:
for a user who already holds a token it refuses (``-r`` replaces the token), where DRF printed the stored value.
"""

from typing import Any

from django.core.management.base import CommandError
from django.db import models
from rest_framework.authtoken.management.commands import drf_create_token
from rest_framework.authtoken.models import Token

from toolhub.api.keys import api_key_issue
from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages


class Command(GovernedCommand, drf_create_token.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(Token)

    def create_user_token(self, username: str, reset_token: bool) -> Any:
        """A new token for ``username``, the old one deleted with ``-r``; returned unsaved, with the key to print."""
        user = drf_create_token.UserModel._default_manager.get_by_natural_key(username)
        if reset_token:
            Token.objects.filter(user=user).delete()
        elif Token.objects.filter(user=user).exists():
            raise CommandError(
                f"{username} already has an API token, whose key was shown once when it was made: "
                "run with -r to replace it with a new one (the old key stops working)."
            )
        return Token(user=user, key=api_key_issue(user))  # never saved: what the command prints
