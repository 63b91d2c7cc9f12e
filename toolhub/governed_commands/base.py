"""The mixin that runs a command's ``handle`` with its writes to governing rows recorded."""

from typing import Any

from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from toolhub.governance_trail import Binding, command_actor, governance_recording

__all__ = ["GovernedCommand", "recorded_as_on_their_pages"]


def recorded_as_on_their_pages(*governed: type[models.Model]) -> dict[type[models.Model], Binding]:
    """Each model's rows recorded as its console page records them (its tenants, secrets, typed names).

    One declaration per model (the page's ``audit_*`` attributes), so a command's event and the page's for the same
    row never differ in the chains they reach or the fields they leave out.
    """
    from toolhub.admin_governance_audit import governing_page

    bindings: dict[type[models.Model], Binding] = {}
    for model in governed:
        found = governing_page(model, admin.site)
        if found is None:
            raise ImproperlyConfigured(f"No governance-audited admin page records {model._meta.label}'s rows.")
        bindings[model] = found[1].audit_binding()
    return bindings


class GovernedCommand:
    """Mixed into a command (before the original): its ``handle`` runs inside one recorded transaction."""

    def governed(self) -> dict[type[models.Model], Binding]:
        """The models whose rows this command's writes are recorded for."""
        raise NotImplementedError

    def handle(self, *args: Any, **options: Any) -> Any:
        with governance_recording(actor=command_actor(), watched=self.governed()):
            return super().handle(*args, **options)  # type: ignore[misc]
