"""DRF's ``drf_create_token``, its token created or replaced recorded (``governance.added`` / ``deleted``)."""

from django.db import models
from rest_framework.authtoken.management.commands import drf_create_token
from rest_framework.authtoken.models import Token

from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages


class Command(GovernedCommand, drf_create_token.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(Token)
