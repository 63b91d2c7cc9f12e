"""Legal status moves are declared once; the guarded transition refuses any other before writing anything."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import event_types
from toolhub.calls import CALL_TRANSITIONS, call_transition
from toolhub.exceptions import InvalidTransitionError
from toolhub.models import CallStatus, ToolCall
from toolhub.sagas.services import COMPENSATION_TRANSITIONS

pytestmark = pytest.mark.django_db


def test_an_undeclared_move_is_refused_and_nothing_is_written(request_call: Any, alice: User) -> None:
    # given a succeeded call
    call = request_call("record_effect", {"note": "x"}, alice)
    assert call.status == CallStatus.SUCCEEDED
    before = event_types(call)

    # when code asks to move it back to running (no such transition is declared)
    with pytest.raises(InvalidTransitionError, match="succeeded to running is not a declared transition"):
        call_transition(call, to=CallStatus.RUNNING, allowed_from={CallStatus.SUCCEEDED}, actor="test")

    # then neither the row nor the trail changed
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED
    assert event_types(call) == before


def test_settled_calls_only_move_on_through_compensation_or_a_retry() -> None:
    assert CALL_TRANSITIONS.allows(CallStatus.SUCCEEDED, CallStatus.COMPENSATED)
    for settled in (CallStatus.DENIED, CallStatus.INVALID, CallStatus.REJECTED, CallStatus.EXPIRED):
        assert not any(CALL_TRANSITIONS.allows(settled, target) for target in CallStatus)
    assert not COMPENSATION_TRANSITIONS.allows("succeeded", "running")
    assert not COMPENSATION_TRANSITIONS.allows("resolved", "pending")
