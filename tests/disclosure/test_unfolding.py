"""Unfolding facades: inner tools, guide and context tools after a call, exclusive mode, categories, nesting."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from tests.helpers import event_types
from toolhub.disclosure import UnfoldingTool
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import AuditEvent, CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_facade_unfolds_into_inner_tools_guide_and_context(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [
        call("database_operations"),
        call("database_operations_context"),
        call("database_operations"),
        call("query_table", sql="select 1"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["clock", "database_operations"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert recorder.names(0) == ["clock", "database_operations"]
    after = recorder.names(1)
    assert after == [
        "clock",
        "database_operations",
        "query_table",
        "insert_record",
        "delete_record",
        "database_operations_context",
    ]
    assert "Guide" in recorder.tool(1, "database_operations")["description"]
    unfold, context, again, query = _calls(run)[:4]
    assert [t["name"] for t in unfold.result["tools"]] == ["query_table", "insert_record", "delete_record"]
    assert context.result["notes"] == "Query before you insert."
    assert context.result["description"].startswith("Work with the database")
    assert [t["name"] for t in again.result["tools"]] == ["query_table", "insert_record", "delete_record"]
    assert query.status == CallStatus.SUCCEEDED
    assert run.disclosure["unfolded"] == {"database_operations": ["query_table", "insert_record", "delete_record"]}


def test_facade_calls_are_audited_like_any_other(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(script=[call("database_operations"), answer()], tools=["database_operations"])

    run = start_run(agent, alice)

    [unfold] = _calls(run)
    assert event_types(unfold) == ["call.requested", "call.queued", "call.running", "call.succeeded"]
    assert AuditEvent.objects.filter(call_id=unfold.id, tool_name="database_operations").count() == 4


def test_denied_inner_tool_is_neither_shown_nor_listed(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="delete_record", user=alice)
    script = [call("database_operations"), call("database_operations_context"), answer()]
    agent = make_agent(script=script, tools=["database_operations"])

    run = start_run(agent, alice)

    unfold, context = _calls(run)
    assert "delete_record" not in str(unfold.result) and "delete_record" not in str(context.result)
    assert "delete_record" not in recorder.names(1) and "delete_record" not in recorder.names(2)
    assert "delete_record" not in str(run.disclosure["visible"])
    # the run stores (and its API and admin show) what the unfold listed, not every declared inner tool
    assert run.disclosure["unfolded"] == {"database_operations": [t["name"] for t in unfold.result["tools"]]}


def _revoking_tool() -> Any:
    from toolhub import Risk, tool

    @tool(risk=Risk.LOW)
    def revoke_delete() -> str:
        """Deny delete_record to alice (an administrator acting while the run goes on)."""
        Grant.objects.create(
            effect=GrantEffect.DENY, tool_name="delete_record", user=User.objects.get(username="alice")
        )
        return "revoked"

    return revoke_delete


def test_an_inner_tool_revoked_after_its_facade_unfolded_leaves_the_stored_state(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    from toolhub.tools.registry import registry

    script = [call("database_operations"), call("revoke_delete"), answer()]
    with registry.temporarily(_revoking_tool()):
        agent = make_agent(script=script, tools=["database_operations", "revoke_delete"])
        run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert "delete_record" in recorder.names(1)
    assert "delete_record" not in recorder.names(2)
    assert run.disclosure["unfolded"] == {"database_operations": ["query_table", "insert_record"]}


def test_facade_whose_inner_tools_are_all_denied_is_not_shown(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="insert_record", user=alice)
    agent = make_agent(script=[call("change_personality"), answer()], tools=["clock", "change_personality"])

    run = start_run(agent, alice)

    assert recorder.names(0) == ["clock"]
    [unfold] = _calls(run)
    # denied like a tool it is not granted (nothing runs), and answered to the model like an unknown tool
    assert unfold.status == CallStatus.DENIED
    assert "insert_record" not in unfold.error
    assert "Unknown tool 'change_personality'. Available tools: clock." in json.dumps(run.messages)


def test_exclusive_facade_hides_every_other_tool_until_the_run_ends(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [call("change_personality"), call("insert_record", table="t"), call("clock"), answer()]
    agent = make_agent(script=script, tools=["clock", "get_weather", "change_personality"], tool_search=False)

    run = start_run(agent, alice)

    assert recorder.names(0) == ["clock", "get_weather", "change_personality"]
    expected = ["change_personality", "insert_record", "change_personality_context"]
    assert recorder.names(1) == expected
    assert recorder.names(2) == expected
    assert recorder.names(3) == expected
    assert run.disclosure["exclusive"] == "change_personality"


def test_by_category_reveals_that_category_only(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [call("file_operations", category="read"), answer()]
    agent = make_agent(script=script, tools=["file_operations"])

    start_run(agent, alice)

    assert recorder.tool(0, "file_operations")["parameters"]["properties"]["category"]["enum"] == ["read", "write"]
    assert recorder.names(1) == ["file_operations", "query_table", "file_operations_context"]


def test_by_category_with_an_unknown_category_is_refused_clearly(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(script=[call("file_operations", category="delete-all"), answer()], tools=["file_operations"])

    run = start_run(agent, alice)

    [unfold] = _calls(run)
    assert unfold.status == CallStatus.INVALID
    assert "category" in unfold.error and len(unfold.error) < 1000
    assert run.disclosure["unfolded"] == {}


def test_selectable_facade_picks_with_its_selector(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [call("api_operations", level="basic"), call("api_operations", level="admin"), answer()]
    agent = make_agent(script=script, tools=["api_operations"])

    run = start_run(agent, alice)

    assert recorder.names(1) == ["api_operations", "query_table", "api_operations_context"]
    assert recorder.names(2) == ["api_operations", "query_table", "delete_record", "api_operations_context"]
    assert run.status == RunStatus.COMPLETED


def test_class_decorator_builds_nested_facades_with_categories(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [
        call("admin_operations"),
        call("user_management", category="read"),
        call("find_user", username="bo"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["admin_operations"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert recorder.names(0) == ["admin_operations"]
    assert recorder.names(1) == ["admin_operations", "status", "user_management", "admin_operations_context"]
    assert "find_user" in recorder.names(2) and "create_user" not in recorder.names(2)
    assert _calls(run)[-1].result == "bo"


def test_selectable_selector_may_build_tools_but_only_known_names_unfold() -> None:
    from tests.disclosure.sample_tools import query_table

    built = UnfoldingTool.selectable(
        "builder",
        "Builds tools.",
        {"n": int},
        lambda arguments: [query_table.tool.with_description(f"built for {arguments['n']}"), "not_a_child"],
        tools=[query_table],
    )

    assert built.select({"n": 3}) == ["query_table"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: UnfoldingTool.of("empty", "Nothing inside.", []),
        lambda: UnfoldingTool.of("bad", "Not tools.", ["query_table"]),
        lambda: UnfoldingTool.by_category("none", "No categories.", {}),
        lambda: UnfoldingTool.from_instance(object()),
    ],
)
def test_bad_facade_definitions_fail_at_definition(build: Any) -> None:
    with pytest.raises(ToolDefinitionError):
        build()
