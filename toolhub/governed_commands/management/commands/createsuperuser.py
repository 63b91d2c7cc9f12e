"""Django's ``createsuperuser``, the account it adds recorded as ``governance.added`` (never its password).

Its username is held to the user pages' rule: none that could read as another's (``toolhub.admin_usernames``).
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser
from django.db import models

from toolhub.admin_usernames import username_problem
from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages


class Command(GovernedCommand, createsuperuser.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(get_user_model())

    def _validate_username(self, username: Any, verbose_field_name: str, database: str) -> str | None:
        error: str | None = super()._validate_username(username, verbose_field_name, database)  # type: ignore[misc]
        if error or not isinstance(username, str):
            return error
        problem = username_problem(username)
        return f"Choose another {verbose_field_name}: {problem}." if problem else None
