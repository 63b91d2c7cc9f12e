"""The core app: autodiscovers tools, freezes the registry, keeps the catalogue in step."""

from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class ToolhubConfig(AppConfig):
    name = "toolhub"
    verbose_name = "Tools and audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from toolhub import checks  # noqa: F401 - registers the system checks
        from toolhub.tools.registry import autodiscover, registry

        if not registry.frozen:
            autodiscover([config.name for config in apps.get_app_configs()])
        post_migrate.connect(_sync_catalogue, sender=self)


def _sync_catalogue(**kwargs: Any) -> None:
    from toolhub.catalogue import tool_catalogue_sync

    tool_catalogue_sync()
