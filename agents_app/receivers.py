"""Wakes a run when one of its calls settles; the loop itself decides whether it can go on."""

import uuid
from typing import Any

from django.dispatch import receiver

from toolhub.signals import call_settled


@receiver(call_settled, dispatch_uid="agents_app.advance_on_settle")
def _on_call_settled(sender: type, call_id: uuid.UUID, run_id: uuid.UUID | None, **kwargs: Any) -> None:
    if run_id is None:
        return
    from agents_app.tasks import advance_run_task

    advance_run_task.delay(str(run_id))
