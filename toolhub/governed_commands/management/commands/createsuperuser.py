"""Django's ``createsuperuser``, the account it adds recorded as ``governance.added`` (never its password)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser
from django.db import models

from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages


class Command(GovernedCommand, createsuperuser.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(get_user_model())
