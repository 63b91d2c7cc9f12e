"""An external call whose result never arrives expires, and the run goes on with that answer."""

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.models import RunStatus, StopReason
from tests.tools.conftest import StartRun
from tests.tools.test_external_and_loop import EXTERNAL_SCRIPT, LOOKUP
from toolhub import registry
from toolhub.models import CallStatus, ToolCall
from toolhub.sweeper import calls_expire_awaiting_results


def test_an_unanswered_external_call_expires_and_the_model_is_told(
    start_run: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    with registry.temporarily(LOOKUP):
        run = start_run(alice, tools=["crm_lookup"], script=EXTERNAL_SCRIPT)
        call = ToolCall.objects.get(run_id=run.id)
        assert call.status == CallStatus.AWAITING_RESULT
        # not yet due: nothing happens
        assert calls_expire_awaiting_results() == 0
        ToolCall.objects.filter(pk=call.pk).update(queued_at=timezone.now() - timedelta(days=2))
        with django_capture_on_commit_callbacks(execute=True):
            assert calls_expire_awaiting_results() == 1
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.EXPIRED
    assert run.status == RunStatus.COMPLETED and run.stop_reason == StopReason.ANSWERED
    assert "expired unanswered" in run.output
