"""An app whose compensation cannot be satisfied: only installed by ``bad_settings`` to prove the startup check."""

from django.apps import AppConfig


class BadAppConfig(AppConfig):
    name = "tests.sagas.badapp"
    label = "sagas_badapp"
    default_auto_field = "django.db.models.BigAutoField"
