"""A tool that returns ``None`` reads to the model as ``TOOLHUB["NONE_RESULT_TEXT"]``, not ``null``."""

from typing import Any

from django.contrib.auth.models import User

from agents_app.models import RunStatus
from tests.helpers import RequestCall
from tests.tools.conftest import StartRun
from toolhub import registry, tool
from toolhub.models import CallStatus, ToolCall


@tool
def archive_ticket(ticket: int) -> None:
    """Archive a ticket; nothing to report."""


def test_a_none_result_reads_as_the_default_success_text(start_run: StartRun, alice: User) -> None:
    script = [
        {"content": "", "tool_calls": [{"name": "archive_ticket", "arguments": {"ticket": 7}}]},
        {"content": "Tool said: {last_tool_result}"},
    ]
    with registry.temporarily(archive_ticket):
        run = start_run(alice, tools=["archive_ticket"], script=script)

    call = ToolCall.objects.get(run_id=run.id)
    # stored as None (the audit keeps what happened), read by the model as the success text
    assert call.status == CallStatus.SUCCEEDED and call.result is None
    assert run.status == RunStatus.COMPLETED and run.output == "Tool said: Done."
    assert run.messages[-2] == {"role": "tool", "tool_call_id": call.model_call_id, "content": "Done."}


def test_the_success_text_is_configurable(request_call: RequestCall, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "NONE_RESULT_TEXT": "OK, nothing to return."}
    with registry.temporarily(archive_ticket):
        call = request_call("archive_ticket", {"ticket": 7})

    assert call.status == CallStatus.SUCCEEDED and call.model_text() == "OK, nothing to return."
