"""The built-in tools' app: installing it is how an administrator makes them exist at all."""

from django.apps import AppConfig


class BuiltinsConfig(AppConfig):
    """Adds the built-in file and shell tools (``tools.py``, autodiscovered) to the registry."""

    name = "toolhub.builtins"
    label = "toolhub_builtins"
    verbose_name = "toolhub built-in tools"
