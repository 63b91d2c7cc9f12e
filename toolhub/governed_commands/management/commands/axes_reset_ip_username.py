"""django-axes' ``axes_reset_ip_username``: each attempt it deletes (a lockout lifted) is ``governance.deleted``."""

from axes.management.commands import axes_reset_ip_username
from axes.models import AccessAttempt
from django.db import models

from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages


class Command(GovernedCommand, axes_reset_ip_username.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(AccessAttempt)
