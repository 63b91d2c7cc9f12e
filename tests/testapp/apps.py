"""A test-only app: tools with countable side effects, for pipeline and fault tests."""

import os

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tests.testapp.faults import DIE_AFTER_SETTLE_ENV, die_after_settle
        from toolhub.signals import call_settled

        if os.environ.get(DIE_AFTER_SETTLE_ENV):
            call_settled.connect(die_after_settle, dispatch_uid="testapp.die_after_settle")
