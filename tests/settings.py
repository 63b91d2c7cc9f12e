"""Test settings: the real settings plus a test-only app whose tools workers can import too."""

from toolhub.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp.apps.TestAppConfig"]  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
