"""Test settings: the real settings plus a test-only app whose tools workers can import too."""

from toolhub.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp.apps.TestAppConfig"]  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Tests about other behaviour need no grants; tests/governance/ switch back to the production default
# ("deny": a user needs a grant) with the `settings` fixture and check it explicitly.
TOOLHUB = {**TOOLHUB, "DEFAULT_TOOL_ACCESS": "allow"}  # noqa: F405
