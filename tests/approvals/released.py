"""Approved calls released with their worker held back: what happens between the release and the worker's run."""

from collections.abc import Callable
from typing import Any

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from toolhub.models import AuditEvent, CallStatus, ToolCall

__all__ = ["released_not_run", "run_held", "sent_back"]


def released_not_run(request: ApprovalRequest, user: Any, capture: Any) -> list[Callable[[], Any]]:
    """Approve so the call is released, holding its dispatch: the worker runs it when the callbacks run."""
    with capture(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=user, expected_round=request.round)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.QUEUED
    return list(callbacks)


def run_held(callbacks: list[Callable[[], Any]], capture: Any) -> None:
    """Run the held dispatches (the worker's claim and run), and what they commit in turn."""
    with capture(execute=True):
        for callback in callbacks:
            callback()


def sent_back(call_id: Any) -> dict[str, Any]:
    """The payload of the worker's latest send-back of the call to the desk (``call.pending_approval``)."""
    event = AuditEvent.objects.filter(call_id=call_id, event_type="call.pending_approval").order_by("seq").last()
    assert event is not None and event.actor.startswith("worker:"), event
    return dict(event.payload)
