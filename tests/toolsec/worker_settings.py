"""Settings of the worker in test_secrets_worker: the test settings plus the app with the leaky tool."""

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.toolsec.leakapp.apps.LeakAppConfig"]  # noqa: F405
