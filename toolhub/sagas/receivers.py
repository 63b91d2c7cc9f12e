"""Follows settled calls into the sagas; the work is done by ``saga_call_settled``."""

import logging
import uuid
from typing import Any

from django.dispatch import receiver

from toolhub.signals import call_settled

logger = logging.getLogger(__name__)


@receiver(call_settled, dispatch_uid="sagas.on_call_settled")
def _on_call_settled(sender: type, call_id: uuid.UUID, run_id: uuid.UUID | None, **kwargs: Any) -> None:
    from toolhub.sagas.services import saga_call_settled, saga_ignores

    call = kwargs.get("call")
    if call is not None and saga_ignores(call):
        return
    try:
        saga_call_settled(call_id=call_id)
    except Exception:  # noqa: BLE001 - the other listeners (the run's wake-up) must still hear of the call
        # Not lost: the periodic sweep applies compensation outcomes, and a rollback records missed steps.
        logger.exception("sagas could not follow settled call %s; the saga sweep will repair it", call_id)
