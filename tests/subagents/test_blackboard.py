"""The run's blackboard and the tools about the run itself: only this run's rows, bounded answers."""

import json
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pydantic import BaseModel

from agents_app.blackboard import (
    MAX_VALUE_BYTES,
    BlackboardError,
    blackboard_count,
    blackboard_entries,
    blackboard_last,
    blackboard_put,
)
from agents_app.models import AgentRun, BlackboardEntry, RunStatus
from agents_app.subagents import SUBAGENT_ANSWER_KIND, Subagent
from approvals.models import WebhookDelivery
from tests.subagents.conftest import MakeAgent, StartRun
from toolhub import Param, Secret, ToolResult, registry, tool
from toolhub.audit import REDACTED
from toolhub.models import CallStatus, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db


@tool
def make_report(title: Annotated[str, Param("The report's title.")]) -> ToolResult:
    """Produce a JSON report as an artifact."""
    return ToolResult.artifact({"title": title, "rows": [1, 2, 3]}, name="report", text="Report stored.")


def _tool_results(run: AgentRun) -> list[Any]:
    """What each tool call of the run answered (its result, or its error), in order."""
    calls = ToolCall.objects.filter(run_id=run.id).order_by("turn", "position")
    return [call.result if call.status == CallStatus.SUCCEEDED else f"ERROR {call.error}" for call in calls]


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls]}


def test_artifacts_go_on_the_blackboard_and_its_tools_read_them(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    script = [
        _calls(("make_report", {"title": "Q1"})),
        _calls(("make_report", {"title": "Q2"})),
        _calls(
            ("blackboard_list", {}),
            ("blackboard_get", {"name": "report"}),
            ("blackboard_get", {"index": 0}),
            ("blackboard_last", {"kind": "make_report"}),
            ("blackboard_count", {"kind": "make_report"}),
            ("blackboard_describe", {"name": "report"}),
        ),
        {"content": "done"},
    ]
    tools = ["make_report", *(f"blackboard_{n}" for n in ("list", "get", "last", "count", "describe"))]
    with registry.temporarily(make_report):
        run = start(make_agent(tools=tools, script=script), alice)
    assert run.status == RunStatus.COMPLETED, run.error
    listed, by_name, by_index, last, count, described = _tool_results(run)[2:]
    assert listed["total"] == 2 and [e["name"] for e in listed["entries"]] == ["report", "report"]
    assert listed["entries"][0]["kind"] == "make_report" and listed["entries"][0]["index"] == 0
    assert by_name == {"title": "Q2", "rows": [1, 2, 3]}  # the latest of that name
    assert by_index == {"title": "Q1", "rows": [1, 2, 3]}
    assert last == {"name": "report", "kind": "make_report", "value": by_name}
    assert count == {"kind": "make_report", "count": 2}
    assert described.startswith("report (kind make_report,") and '"Q2"' in described
    entries = BlackboardEntry.objects.filter(run=run)
    assert [e.tenant for e in entries] == ["acme", "acme"] and all(e.produced_by_call_id for e in entries)


def test_blackboard_tools_never_show_another_runs_or_tenants_entries(
    make_agent: MakeAgent, start: StartRun, alice: User, other_tenant: Any
) -> None:
    bob = User.objects.create_user("bob", "bob@example.com", "pw")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    script = [
        _calls(
            ("blackboard_list", {}), ("blackboard_get", {"name": "secret-plan"}), ("blackboard_count", {"kind": "Plan"})
        ),
        {"content": "done"},
    ]
    agent = make_agent(tools=["blackboard_list", "blackboard_get", "blackboard_count"], script=script)
    first = start(agent, alice)
    blackboard_put(first, "secret-plan", {"x": 1}, kind="Plan")
    theirs = start(agent, bob)
    blackboard_put(theirs, "secret-plan", {"x": 2}, kind="Plan")
    again = start(agent, alice)
    listed, got, counted = _tool_results(again)
    assert listed == {"entries": [], "total": 0}
    assert got.startswith("ERROR No blackboard entry named 'secret-plan'. The blackboard is empty.")
    assert counted == {"kind": "Plan", "count": 0}
    assert list(blackboard_entries(again)) == []
    assert [e.value for e in blackboard_entries(first)] == [{"x": 1}]


def test_bad_inputs_get_bounded_errors(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    script = [
        _calls(
            ("blackboard_get", {"name": "nope" * 40}),
            ("blackboard_get", {"index": 10**12}),
            ("blackboard_get", {"index": 7}),
            ("blackboard_get", {}),
            ("blackboard_last", {"kind": "Missing"}),
            ("blackboard_describe", {"name": "x" * 5000}),
        ),
        {"content": "done"},
    ]
    run = start(make_agent(tools=["blackboard_get", "blackboard_last", "blackboard_describe"], script=script), alice)
    blackboard_put(run, "a", 1, kind="Number")
    unknown, huge, beyond, neither, missing, too_long = ToolCall.objects.filter(run_id=run.id).order_by("position")
    assert unknown.status == CallStatus.FAILED and unknown.error.startswith("No blackboard entry named 'nopenope")
    assert len(unknown.error) < 300
    assert huge.status == CallStatus.INVALID and len(huge.error) < 500
    assert beyond.status == CallStatus.FAILED and beyond.error == "No entry at index 7; the blackboard has 0 entries."
    assert neither.status == CallStatus.FAILED and neither.error == "Give exactly one of name or index."
    assert missing.status == CallStatus.FAILED and "No blackboard entry of kind 'Missing'" in missing.error
    assert too_long.status == CallStatus.INVALID and len(too_long.error) < 500


def test_put_is_bounded_redacted_and_type_matched(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    run = start(make_agent(tools=[], script=[{"content": "hi"}]), alice)
    entry = blackboard_put(run.id, "card", {"number": "4111", "holder": "A"}, kind="crm.Card", sensitive={"number"})
    assert entry.value == {"number": REDACTED, "holder": "A"} and entry.tenant == "acme"
    assert blackboard_last(run, "Card") == entry and blackboard_count(run, "crm.Card") == 1
    assert blackboard_count(run, "rm.Card") == 0
    with pytest.raises(BlackboardError, match="at most"):
        blackboard_put(run, "big", "x" * (MAX_VALUE_BYTES + 1), kind="Text")
    with pytest.raises(BlackboardError, match="needs a name"):
        blackboard_put(run, " ", 1, kind="Text")
    with pytest.raises(BlackboardError, match="Unknown run"):
        blackboard_put("not-a-run", "a", 1, kind="Text")
    with pytest.raises(BlackboardError, match="JSON"):
        blackboard_put(run, "a", {"x": object()}, kind="Text")
    assert BlackboardEntry.objects.filter(run=run).count() == 1


class Topic(BaseModel):
    topic: Annotated[str, Param("What to look into.")]


def test_a_child_reads_its_parents_board_and_leaves_its_entries_and_answer_there(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    helper = Subagent.of("reader", "Ask the reader.", Topic, name="ask_reader")
    with registry.temporarily(helper, make_report):
        make_agent(
            name="reader",
            tools=["blackboard_get", "make_report"],
            script=[
                _calls(("blackboard_get", {"name": "report"}), ("make_report", {"title": "child's"})),
                {"content": "read: {last_tool_result}"},
            ],
        )
        parent = start(
            make_agent(
                tools=["make_report", "ask_reader", "blackboard_count"],
                script=[
                    _calls(("make_report", {"title": "parent's"})),
                    _calls(("ask_reader", {"topic": "t"})),
                    _calls(
                        ("blackboard_count", {"kind": "make_report"}), ("blackboard_count", {"kind": "SubagentAnswer"})
                    ),
                    {"content": "done"},
                ],
            ),
            alice,
        )
    child = AgentRun.objects.get(parent_run=parent)
    assert _tool_results(child)[0] == {"title": "parent's", "rows": [1, 2, 3]}
    assert parent.status == RunStatus.COMPLETED
    reports, answers = _tool_results(parent)[2:]
    assert reports == {"kind": "make_report", "count": 2} and answers == {"kind": SUBAGENT_ANSWER_KIND, "count": 1}
    answer = blackboard_last(parent, SUBAGENT_ANSWER_KIND)
    assert answer is not None and answer.name == "ask_reader" and answer.value == child.output


def test_introspection_shows_only_this_run(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    script = [
        _calls(("record_effect", {"note": "a"}), ("always_fails", {"reason": "r"})),
        _calls(("run_status", {}), ("run_budget", {}), ("run_history", {}), ("run_tool_stats", {})),
        {"content": "done"},
    ]
    agent = make_agent(
        tools=["record_effect", "always_fails", "run_status", "run_budget", "run_history", "run_tool_stats"],
        script=script,
        max_tool_calls=8,
    )
    start(agent, alice)  # another run of the same agent and user
    run = start(agent, alice)
    status, budget, history, stats = _tool_results(run)[2:]
    assert status["run_id"] == str(run.id) and status["depth"] == 0 and status["parent_run"] is None
    assert status["agent"] == agent.name and status["status"] == "running" and status["turn"] == 2
    assert budget["tool_calls"] == {"used": 6, "limit": 8, "left": 2}
    assert budget["tokens"]["limit"] is None and budget["tokens"]["used"] > 0
    assert [h["tool"] for h in history] == [
        "record_effect",
        "always_fails",
        "run_status",
        "run_budget",
        "run_history",
        "run_tool_stats",
    ]
    assert history[0] == {"turn": 1, "tool": "record_effect", "status": "succeeded"}
    assert all(set(h) == {"turn", "tool", "status"} for h in history)  # never arguments or results
    assert stats["record_effect"] == {"calls": 1, "succeeded": 1, "failed": 0}
    assert stats["always_fails"] == {"calls": 1, "succeeded": 0, "failed": 1}


def test_communicate_is_kept_on_the_run_and_notified_and_progress_replaces_itself(
    make_agent: MakeAgent, start: StartRun, alice: User, operator: User, settings: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "http://127.0.0.1:9/unreachable"}
    script = [
        _calls(("progress", {"status": "Searching"}), ("communicate", {"message": "Found the PR: #12"})),
        _calls(("progress", {"status": "Writing"}), ("communicate", {"message": ""})),
        {"content": "done"},
    ]
    run = start(make_agent(tools=["progress", "communicate"], script=script), alice)
    assert run.status == RunStatus.COMPLETED
    kinds = [(u["kind"], u["text"]) for u in run.updates]
    assert kinds == [("message", "Found the PR: #12"), ("progress", "Writing")]
    empty = ToolCall.objects.get(run_id=run.id, turn=2, tool_name="communicate")
    assert empty.status == CallStatus.INVALID
    delivery = WebhookDelivery.objects.get(event="run.message")
    assert delivery.payload["run"] == str(run.id) and delivery.payload["message"] == "Found the PR: #12"
    assert delivery.payload["tenant"] == "acme"
    client = Client()
    client.force_login(operator)
    page = client.get(f"/admin/agents_app/agentrun/{run.id}/change/").content.decode()
    assert "Found the PR: #12" in page and 'id="run-blackboard"' in page


def test_tools_about_the_run_refuse_outside_a_run(
    request_call: Any, make_agent: MakeAgent, start: StartRun, alice: User, other_tenant: Any
) -> None:
    bob = User.objects.create_user("bob", "bob@example.com", "pw")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    theirs = start(make_agent(tools=[], script=[{"content": "hi"}]), bob)
    blackboard_put(theirs, "plan", {"x": 1}, kind="Plan")
    for run_id in ("x", str(theirs.id)):  # no run, and another tenant's run named in acme's context
        for name, arguments in (("blackboard_list", {}), ("run_status", {}), ("communicate", {"message": "hi"})):
            call = request_call(name, arguments, alice, tenant="acme", context={"run_id": run_id, "tenant": "acme"})
            assert call.status == CallStatus.FAILED and call.error == "This tool works only inside an agent run."
    theirs.refresh_from_db()
    assert theirs.updates == []


def test_an_artifact_holding_a_secret_is_on_the_board_without_it(
    make_agent: MakeAgent, start: StartRun, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_TEST_TOKEN", "tok-very-secret")

    @tool(presets={"token": Secret("TOOLHUB_TEST_TOKEN")})
    def leaky_report(token: str) -> ToolResult:
        """Return a report that quotes the token."""
        return ToolResult.artifact({"auth": token, "rows": 2}, name="leaky")

    script = [_calls(("leaky_report", {})), _calls(("blackboard_get", {"name": "leaky"})), {"content": "done"}]
    with registry.temporarily(leaky_report):
        run = start(make_agent(tools=["leaky_report", "blackboard_get"], script=script), alice)
    entry = BlackboardEntry.objects.get(run=run)
    assert "tok-very-secret" not in json.dumps(entry.value) and entry.value["rows"] == 2
    assert "tok-very-secret" not in json.dumps(_tool_results(run))


def test_run_tools_go_through_grants_like_any_tool(
    make_agent: MakeAgent, start: StartRun, alice: User, settings: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    script = [_calls(("blackboard_list", {}), ("communicate", {"message": "hi"})), {"content": "done"}]
    run = start(make_agent(tools=["blackboard_list", "communicate"], script=script), alice)
    calls = list(ToolCall.objects.filter(run_id=run.id).order_by("position"))
    assert [call.status for call in calls] == [CallStatus.DENIED, CallStatus.DENIED]
    run.refresh_from_db()
    assert run.updates == []


def test_a_json_artifact_nested_too_deep_is_on_the_board_as_text(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """``json.loads`` would raise RecursionError on it (a crashed step): it is kept as the text it is."""
    deep = "[" * 20_000 + "]" * 20_000

    @tool
    def deep_report() -> ToolResult:
        """Return a deeply nested JSON document as an artifact."""
        return ToolResult.artifact(deep.encode(), name="deep", media_type="application/json")

    script = [_calls(("deep_report", {})), {"content": "done"}]
    with registry.temporarily(deep_report):
        run = start(make_agent(tools=["deep_report"], script=script), alice)
    assert run.status == RunStatus.COMPLETED, run.error
    assert BlackboardEntry.objects.get(run=run).value == deep
