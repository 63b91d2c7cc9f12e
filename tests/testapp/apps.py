"""A test-only app: tools with countable side effects, for pipeline and fault tests."""

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"
