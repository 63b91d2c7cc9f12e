"""tool_search at run time with the providers toolhub ships (not the test provider): grants still bound hits."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db

TOOLS = ["clock", "get_weather", "send_email", "refund_payment"]


@pytest.mark.parametrize("provider", ["lexical", "hybrid"])
def test_a_shipped_provider_finds_a_granted_tool_and_never_a_denied_one(
    provider: str, make_agent: Any, start_run: Any, alice: User, recorder: Recorder, settings: Any
) -> None:
    # given: the real provider, and refund_payment denied to alice
    settings.TOOLHUB = {**settings.TOOLHUB, "TOOL_SEARCH_PROVIDER": provider}
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    script = [
        call("tool_search", query="what will the weather be in Paris tomorrow?"),
        call("tool_search", query="give the customer their money back", max_results=20),
        answer(),
    ]
    agent = make_agent(script=script, tools=TOOLS, tool_search=True)

    # when
    run = start_run(agent, alice)

    # then: the weather tool is found and shown on the next turn; the denied refund never appears
    assert run.status == RunStatus.COMPLETED, run.error
    weather, refund = ToolCall.objects.filter(run_id=run.id).order_by("turn", "position")
    assert weather.status == CallStatus.SUCCEEDED and refund.status == CallStatus.SUCCEEDED
    assert weather.result["tools"][0] == "get_weather"
    assert "get_weather" in recorder.names(1)
    assert "refund_payment" not in refund.result["tools"]
    assert all("refund_payment" not in recorder.names(turn) for turn in range(3))
