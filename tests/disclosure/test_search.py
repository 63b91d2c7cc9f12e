"""tool_search at run time: resident tools stay, hits arrive on the next turn, denied tools never surface."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from tests.disclosure.providers import WordProvider
from tests.helpers import event_types
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

TOOLS = ["clock", "get_weather", "send_email", "refund_payment"]


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_first_turn_shows_resident_tools_and_search_only(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(script=[answer()], tools=TOOLS, tool_search=True)

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED
    assert recorder.names(0) == ["clock", "tool_search"]
    assert run.disclosure["visible"] == ["clock", "tool_search"]


def test_hits_arrive_next_turn_and_the_latest_search_replaces_them(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [
        call("tool_search", query="weather forecast"),
        call("get_weather", city="Paris"),
        call("tool_search", query="send email"),
        answer(),
    ]
    agent = make_agent(script=script, tools=TOOLS, tool_search=True)

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    first, used, second = _calls(run)[:3]
    assert first.result["tools"] == ["get_weather"]
    assert used.status == CallStatus.SUCCEEDED
    assert recorder.names(1) == ["clock", "tool_search", "get_weather"]
    assert recorder.names(3) == ["clock", "tool_search", "send_email"]  # get_weather is gone
    assert second.result["tools"] == ["send_email"]
    assert run.disclosure["hits"] == ["send_email"]
    # resident tools are never in the index
    assert all("clock" not in built for built in WordProvider.built)
    # a search is an audited call like any other
    assert event_types(first)[0] == "call.requested" and event_types(first)[-1] == "call.succeeded"


def test_denied_tool_never_in_index_hits_or_suggestions(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    script = [
        call("tool_search", query="refund payment customer", max_results=20),
        call("refund_paymnt", payment="p1"),
        answer(),
    ]
    agent = make_agent(script=script, tools=TOOLS, tool_search=True)

    run = start_run(agent, alice)

    search, unknown = _calls(run)
    assert search.result["tools"] == []
    assert all("refund_payment" not in built for built in WordProvider.built)
    assert unknown.status == CallStatus.INVALID
    assert "refund_payment" not in unknown.error
    assert "refund_payment" not in json.dumps(run.messages)
    assert all("refund_payment" not in recorder.names(turn) for turn in range(3))


def test_another_tenants_grant_never_reaches_the_index(
    make_agent: Any, start_run: Any, alice: User, other_tenant: Tenant, settings: Any, recorder: Recorder
) -> None:
    # given: with grants required, only globex's users are given send_email; alice (acme) the rest
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="send_email", tenant=other_tenant)
    for name in ("clock", "get_weather"):
        Grant.objects.create(tool_name=name, user=alice)
    agent = make_agent(
        script=[call("tool_search", query="send email message"), answer()], tools=TOOLS, tool_search=True
    )

    run = start_run(agent, alice)

    [search] = _calls(run)
    assert search.status == CallStatus.SUCCEEDED
    assert search.result["tools"] == []
    assert WordProvider.built == [["get_weather"]]


def test_revoked_grant_leaves_the_index_before_the_next_search(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [call("tool_search", query="weather"), answer()]
    agent = make_agent(script=script, tools=TOOLS, tool_search=True)
    first = start_run(agent, alice)
    assert _calls(first)[0].result["tools"] == ["get_weather"]

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="get_weather", user=alice)
    second = start_run(agent, alice)

    assert _calls(second)[0].result["tools"] == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "   "}, "needs a query"),
        ({"query": ""}, "query"),
        ({"query": "weather", "max_results": 10_000}, "max_results"),
        ({"query": "weather", "max_results": 0}, "max_results"),
        ({"query": "x" * 600}, "query"),
        ({}, "query"),
        ({"query": "weather", "category": "a\x07b"}, "category"),
    ],
)
def test_bad_search_inputs_get_clear_bounded_errors(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, arguments: dict[str, Any], expected: str
) -> None:
    agent = make_agent(script=[call("tool_search", **arguments), answer()], tools=TOOLS, tool_search=True)

    run = start_run(agent, alice)

    [search] = _calls(run)
    assert search.status in (CallStatus.INVALID, CallStatus.FAILED)
    assert expected in search.error
    assert len(search.error) < 1000
    assert run.disclosure["hits"] == []
    assert run.status == RunStatus.COMPLETED


def test_category_narrows_the_search(make_agent: Any, start_run: Any, alice: User, recorder: Recorder) -> None:
    script = [call("tool_search", query="send weather email forecast", category="mail"), answer()]
    agent = make_agent(script=script, tools=TOOLS, tool_search=True)

    run = start_run(agent, alice)

    assert _calls(run)[0].result["tools"] == ["send_email"]


def test_search_is_not_callable_by_an_agent_without_it(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(script=[call("tool_search", query="weather"), answer()], tools=TOOLS)

    run = start_run(agent, alice)

    [search] = _calls(run)
    assert search.status == CallStatus.DENIED
    assert "tool_search" not in recorder.names(0)
    assert recorder.names(0) == TOOLS


def test_a_hit_in_an_eligible_group_put_away_at_the_start_is_shown_next_turn(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # given a group every run may equip but none starts with
    ToolGroup.objects.create(name="payments", active_by_default=False)
    script = [call("tool_search", query="refund payment customer"), call("refund_payment", payment="p1"), answer()]
    agent = make_agent(script=script, tools=TOOLS, tool_search=True)

    # when the model finds one of its tools
    run = start_run(agent, alice)

    # then the search equips it: shown next turn, as the search promised, and callable
    assert run.status == RunStatus.COMPLETED, run.error
    search, refund = _calls(run)
    assert search.result["tools"] == ["refund_payment"]
    assert recorder.names(1) == ["clock", "tool_search", "refund_payment"]
    assert refund.status == CallStatus.SUCCEEDED


def test_a_tool_of_a_group_meant_for_another_role_is_neither_found_nor_shown(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # given the payments group only for the finance role, which alice does not hold
    ToolGroup.objects.create(name="payments", activation_rules=[{"roles": ["finance"]}])
    agent = make_agent(
        script=[call("tool_search", query="refund payment customer"), answer()], tools=TOOLS, tool_search=True
    )

    run = start_run(agent, alice)

    [search] = _calls(run)
    assert search.status == CallStatus.SUCCEEDED and search.result["tools"] == []
    assert "refund_payment" not in recorder.names(1)
