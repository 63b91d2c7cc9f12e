"""Django's ``changepassword``, the change recorded as ``governance.changed`` (that the password changed, only)."""

from django.contrib.auth.management.commands import changepassword
from django.db import models

from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import ACCOUNTS, GovernedCommand


class Command(GovernedCommand, changepassword.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return ACCOUNTS
