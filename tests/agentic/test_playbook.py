"""PlaybookTool: a locked tool is refused with guidance (and not run) until what unlocks it happened."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from tests.agentic import sample_tools
from tests.agentic.conftest import Recorder, answer, call
from tests.helpers import event_types
from toolhub.agentic import PlaybookTool, Unlock
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import AuditEvent, CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_locked_tool_is_refused_with_guidance_then_allowed_after_its_prerequisite(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # given a playbook where analyze unlocks after search
    script = [call("analyze"), call("search", topic="tides"), call("analyze"), answer()]
    agent = make_agent(script=script, tools=["researcher"])

    # when the model calls analyze first, then search, then analyze again
    run = start_run(agent, alice)

    # then the first analyze was answered with what unlocks it and not run; the second ran
    assert run.status == RunStatus.COMPLETED, run.error
    locked, searched, analyzed = _calls(run)
    assert locked.status == CallStatus.INVALID
    assert "locked" in locked.error and "'search'" in locked.error and "it was not run" in locked.error
    assert event_types(locked) == ["call.requested", "call.invalid"]
    assert AuditEvent.objects.get(call_id=locked.id, event_type="call.invalid").actor == "agentic"
    assert searched.status == CallStatus.SUCCEEDED and analyzed.status == CallStatus.SUCCEEDED
    assert sample_tools.RAN == ["search", "analyze"]
    # the playbook's run state is stored on the run
    assert run.disclosure["agentic"]["researcher"]["done"] == ["search", "analyze"]
    # every tool of the playbook is shown (a locked one answers with guidance), with the playbook's guide
    assert set(recorder.names(0)) == {"researcher", "search", "write_report", "analyze", "summarize", "publish"}
    assert "Done so far: search." in recorder.tool(2, "researcher")["description"]


def test_artifact_and_predicate_conditions_unlock_together(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [
        call("publish"),
        call("write_report"),
        call("publish"),
        call("search", topic="x"),
        call("analyze"),
        call("summarize"),
        call("publish"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["researcher"], max_tool_calls=20)

    run = start_run(agent, alice)

    calls = _calls(run)
    first, _, second = calls[:3]
    assert first.status == CallStatus.INVALID
    assert "'report.md'" in first.error and "summarize first" in first.error
    # the artifact is there now; the predicate still waits
    assert second.status == CallStatus.INVALID
    assert "'report.md'" not in second.error and "summarize first" in second.error
    assert calls[-1].tool_name == "publish" and calls[-1].status == CallStatus.SUCCEEDED
    assert sample_tools.RAN.count("publish") == 1


def test_denied_stays_denied_and_guidance_names_no_denied_tool(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # given search (analyze's prerequisite) and summarize are denied to alice
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="search", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="summarize", user=alice)
    agent = make_agent(script=[call("analyze"), call("summarize"), call("researcher"), answer()], tools=["researcher"])

    run = start_run(agent, alice)

    locked, denied, guide = _calls(run)
    assert locked.status == CallStatus.INVALID
    assert "cannot be unlocked for you" in locked.error and "'search'" not in locked.error
    # a denied tool is answered as denied, never with guidance
    assert denied.status == CallStatus.DENIED
    assert "search" not in recorder.names(0) and "summarize" not in recorder.names(0)
    listed = [step["name"] for step in guide.result["tools"]]
    assert "search" not in listed and "summarize" not in listed
    assert sample_tools.RAN == []


def test_playbook_definition_mistakes_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="not tools of it"):
        PlaybookTool("p", "d", tools=[sample_tools.search], locked={sample_tools.analyze: Unlock(after_all=["nope"])})
    with pytest.raises(ToolDefinitionError, match="needs an Unlock"):
        PlaybookTool("p", "d", tools=[sample_tools.search], locked={sample_tools.analyze: "search"})  # type: ignore[dict-item]
    with pytest.raises(ToolDefinitionError, match="not a tool"):
        PlaybookTool("p", "d", tools=[len])
    with pytest.raises(ToolDefinitionError, match="no tools"):
        PlaybookTool("p", "d")
