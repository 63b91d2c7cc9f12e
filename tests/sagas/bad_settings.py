"""Test settings plus an app with an unsatisfiable compensation mapping (``manage.py check`` must refuse it)."""

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.sagas.badapp.apps.BadAppConfig"]  # noqa: F405
