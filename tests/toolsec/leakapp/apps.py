from django.apps import AppConfig


class LeakAppConfig(AppConfig):
    """A test-only app whose tools.py holds a tool that tries every way to leak its secret (workers import it)."""

    name = "tests.toolsec.leakapp"
    label = "toolsec_leakapp"
