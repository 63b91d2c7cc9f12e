"""Django's ``changepassword``, the change recorded as ``governance.changed`` (that the password changed, only)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import changepassword
from django.db import models

from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages


class Command(GovernedCommand, changepassword.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(get_user_model())
