"""Approvals: operators approve, edit or reject calls that policy holds back."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals import receivers  # noqa: F401 - connects to the core's signals
