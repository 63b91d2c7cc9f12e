"""The rule every framework adapter answers an approval pause by (``toolhub.adapters._common``)."""

import pytest

from toolhub.adapters._common import NOT_RUN_STATUSES, RELEASED_STATUSES, pause_decision
from toolhub.models import CallStatus, ToolCall


@pytest.mark.parametrize("status", list(CallStatus))
def test_only_a_released_call_is_approved(status: CallStatus) -> None:
    call = ToolCall(tool_name="risky_effect", status=status, error="Not executed: cancelled by user:alice: oops")

    decided = pause_decision(call)

    if status == CallStatus.PENDING_APPROVAL:
        assert decided is None
    elif status in RELEASED_STATUSES:
        assert decided is not None and decided.approve
    else:
        assert decided is not None and not decided.approve
        assert decided.message == "Not executed: cancelled by user:alice: oops"


def test_a_withdrawn_call_is_among_those_that_never_ran() -> None:
    assert CallStatus.CANCELLED in NOT_RUN_STATUSES
    assert NOT_RUN_STATUSES.isdisjoint(RELEASED_STATUSES)
