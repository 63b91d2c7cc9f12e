"""Django's ``createsuperuser``, the account it adds recorded as ``governance.added`` (never its password).

Its username is held to the user pages' rule: none that could read as another's (``toolhub.admin_usernames``).
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser
from django.db import models

from toolhub.confusable_names import reads_as_existing
from toolhub.governance_trail import Binding
from toolhub.governed_commands.base import GovernedCommand, recorded_as_on_their_pages
from toolhub.visible import lookalike_problem


class Command(GovernedCommand, createsuperuser.Command):
    def governed(self) -> dict[type[models.Model], Binding]:
        return recorded_as_on_their_pages(get_user_model())

    def _validate_username(self, username: Any, verbose_field_name: str, database: str) -> str | None:
        error: str | None = super()._validate_username(username, verbose_field_name, database)  # type: ignore[misc]
        if error or not isinstance(username, str):
            return error
        problem = lookalike_problem(username)
        if problem:
            return f"Choose another {verbose_field_name}: {problem}; it would read as another person's name."
        existing = reads_as_existing(username)
        if existing is not None:
            return f"Choose another {verbose_field_name}: it reads as the existing account {existing!r}."
        return None
