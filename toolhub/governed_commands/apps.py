"""The app whose commands wrap third-party ones (see the package's docstring)."""

from django.apps import AppConfig


class GovernedCommandsConfig(AppConfig):
    name = "toolhub.governed_commands"
    label = "toolhub_governed_commands"
    verbose_name = "Governed management commands"
