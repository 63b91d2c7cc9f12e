"""The built-in tools' app: installing it is how an administrator makes them exist at all."""

from django.apps import AppConfig


class BuiltinsConfig(AppConfig):
    """Adds the built-in file and shell tools (``tools.py``, autodiscovered) to the registry."""

    name = "toolhub.builtins"
    label = "toolhub_builtins"
    verbose_name = "toolhub built-in tools"

    def ready(self) -> None:
        from django.core.checks import register

        from toolhub.builtins.checks import check_builtin_settings

        register(check_builtin_settings, "toolhub")
