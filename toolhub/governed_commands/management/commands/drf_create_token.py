"""DRF's ``drf_create_token``, its token created or replaced recorded (``governance.added`` / ``deleted``)."""

from django.db import models
from rest_framework.authtoken.management.commands import drf_create_token

from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import TOKENS, GovernedCommand


class Command(GovernedCommand, drf_create_token.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return TOKENS
