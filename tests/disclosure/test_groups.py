"""Tool groups at run time: activation rules, prompt additions, reset_equipped_tools, capabilities, provider hook."""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.exceptions import ValidationError

from agents_app.models import RunStatus
from agents_app.services import RunInputError
from tests.disclosure.conftest import Recorder, answer, call
from tests.helpers import for_a_worker
from toolhub.disclosure.capabilities import capability_permissions_ensure
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

TOOLS = ["clock", "get_weather", "list_payments", "refund_payment", "sales_report"]


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_groups_with_rules_activate_on_role_tenant_agent_and_context(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    ToolGroup.objects.create(name="payments", activation_rules=[{"roles": ["finance"]}])
    ToolGroup.objects.create(
        name="reports",
        activation_rules=[{"tenants": ["acme"], "agents": ["discloser"], "context": {"channel": ["web", "app"]}}],
    )
    agent = make_agent(script=[answer(), answer()], tools=TOOLS)

    start_run(agent, alice, context={"channel": "phone"})
    assert recorder.names(0) == ["clock", "get_weather"]

    alice.groups.add(Group.objects.create(name="finance"))
    start_run(agent, alice, context={"channel": "web"})
    assert recorder.names(1) == TOOLS


def test_inactive_by_default_group_is_hidden_until_equipped(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    ToolGroup.objects.create(name="payments", active_by_default=False)
    script = [call("reset_equipped_tools", groups=["payments"]), call("list_payments"), answer()]
    agent = make_agent(script=script, tools=TOOLS, group_switching=True)

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert recorder.names(0) == ["clock", "get_weather", "sales_report", "reset_equipped_tools"]
    # Equipping exactly payments puts reports away; ungrouped tools stay.
    assert recorder.names(1) == ["clock", "get_weather", "list_payments", "refund_payment", "reset_equipped_tools"]
    assert run.disclosure["active_groups"] == ["payments"]


def test_active_groups_prompt_additions_are_sent_in_the_leading_system_message(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    ToolGroup.objects.create(name="payments", system_prompt_addition="Refunds over 100 EUR need a reason.")
    ToolGroup.objects.create(name="reports", active_by_default=False, system_prompt_addition="Reports are weekly.")
    agent = make_agent(script=[answer()], tools=TOOLS, system_prompt="Be brief.")

    run = start_run(agent, alice)

    assert recorder.turns[0]["system"] == "Be brief.\n\nRefunds over 100 EUR need a reason."
    assert [m["role"] for m in recorder.turns[0]["messages"]] == ["system", "user"]
    assert run.messages[0]["content"] == "Be brief."  # not stored: rebuilt every turn


@pytest.mark.parametrize("wanted", [["nonexistent"], ["payments"]])
def test_unknown_and_denied_groups_get_the_same_answer(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, wanted: list[str]
) -> None:
    # payments holds only tools alice is denied: to her it does not exist
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="list_payments", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    ToolGroup.objects.create(name="payments")
    agent = make_agent(
        script=[call("reset_equipped_tools", groups=wanted), answer()], tools=TOOLS, group_switching=True
    )

    run = start_run(agent, alice)

    [reset] = _calls(run)
    assert reset.status == CallStatus.FAILED
    assert reset.error == f"Unknown tool group(s) {wanted[0]!r}. Groups you may equip: reports."
    assert run.disclosure["active_groups"] is None


def test_a_group_whose_rule_does_not_match_cannot_be_equipped(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    ToolGroup.objects.create(name="payments", activation_rules=[{"roles": ["finance"]}])
    agent = make_agent(
        script=[call("reset_equipped_tools", groups=["payments"]), answer()], tools=TOOLS, group_switching=True
    )

    run = start_run(agent, alice)

    [reset] = _calls(run)
    assert reset.status == CallStatus.FAILED and "Unknown tool group(s) 'payments'" in reset.error
    assert "list_payments" not in recorder.names(1)


def test_a_group_bound_to_another_tenant_hides_its_facades_and_resident_tools_too(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # given a group only globex's runs may use, holding a facade and an always-visible tool
    ToolGroup.objects.create(
        name="globex_only", activation_rules=[{"tenants": ["globex"]}], extra_tools=["database_operations", "clock"]
    )
    agent = make_agent(
        script=[call("database_operations"), answer()], tools=["clock", "get_weather", "database_operations"]
    )

    # when acme's model calls the facade it is not shown
    run = start_run(agent, alice)

    # then neither is shown, the facade does not unfold and is answered like a tool that does not exist
    assert run.status == RunStatus.COMPLETED, run.error
    assert recorder.names(0) == ["get_weather"] and recorder.names(1) == ["get_weather"]
    [unfold] = _calls(run)
    assert unfold.status == CallStatus.DENIED
    assert "Unknown tool 'database_operations'" in recorder.turns[1]["messages"][-1]["content"]
    assert run.disclosure["unfolded"] == {}


def test_a_facade_in_an_eligible_group_put_away_stays_shown(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # a group any run may equip, not active at the start: navigation tools are resident, as before
    ToolGroup.objects.create(name="database", active_by_default=False, extra_tools=["database_operations"])
    agent = make_agent(script=[answer()], tools=["get_weather", "database_operations"])

    start_run(agent, alice)

    assert recorder.names(0) == ["get_weather", "database_operations"]


def test_an_unknown_tool_is_answered_with_suggestions_of_eligible_groups_only(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    ToolGroup.objects.create(name="payments", activation_rules=[{"roles": ["finance"]}])
    agent = make_agent(script=[call("list_paymnts"), answer()], tools=TOOLS)

    start_run(agent, alice)

    told = recorder.turns[1]["messages"][-1]["content"]
    assert told == "Unknown tool 'list_paymnts'. Available tools: clock, get_weather, sales_report.", told


@pytest.mark.parametrize(
    "arguments",
    [{"groups": "payments"}, {"groups": ["x" * 500]}, {"groups": [f"g{i}" for i in range(1000)]}, {}],
)
def test_bad_group_inputs_get_clear_bounded_errors(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, arguments: dict[str, Any]
) -> None:
    agent = make_agent(script=[call("reset_equipped_tools", **arguments), answer()], tools=TOOLS, group_switching=True)

    run = start_run(agent, alice)

    [reset] = _calls(run)
    assert reset.status == CallStatus.INVALID
    assert "groups" in reset.error and len(reset.error) < 2000
    assert run.disclosure["active_groups"] is None


def test_capability_needs_its_permission_when_listed_and_called(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    group = ToolGroup.objects.create(name="payments", capabilities=["money_movement"])
    capability_permissions_ensure(group.capabilities)
    agent = make_agent(script=[call("list_payments"), answer()], tools=TOOLS)

    run = start_run(agent, alice)

    assert "list_payments" not in recorder.names(0)
    [denied] = _calls(run)
    assert denied.status == CallStatus.DENIED
    assert "capability 'money_movement'" in denied.error

    alice.user_permissions.add(Permission.objects.get(codename="capability_money_movement"))
    run = start_run(agent, alice)
    assert "list_payments" in recorder.names(2)  # the second run's first turn
    assert _calls(run)[0].status == CallStatus.SUCCEEDED


def test_capability_is_checked_again_when_the_call_executes(
    alice: User, request_call: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # given: alice holds the capability when she asks
    group = ToolGroup.objects.create(name="payments", capabilities=["money_movement"])
    [permission] = capability_permissions_ensure(group.capabilities)
    alice.user_permissions.add(permission)
    with for_a_worker(), django_capture_on_commit_callbacks() as dispatches:
        queued = request_call("list_payments", {}, alice, tenant="acme")
    assert queued.status == CallStatus.QUEUED

    # when: it is taken away before a worker runs the call
    alice.user_permissions.remove(permission)
    for dispatch in dispatches:
        dispatch()

    # then
    queued.refresh_from_db()
    assert queued.status == CallStatus.DENIED
    assert "money_movement" in queued.error


def test_group_rules_and_capabilities_are_validated() -> None:
    with pytest.raises(ValidationError, match="unknown key"):
        ToolGroup(name="g", activation_rules=[{"role": ["x"]}]).full_clean()
    with pytest.raises(ValidationError, match="list"):
        ToolGroup(name="g", activation_rules={"roles": ["x"]}).full_clean()
    with pytest.raises(ValidationError, match="Capability"):
        ToolGroup(name="g", capabilities=["Money Movement!"]).full_clean()


def test_provider_hook_adds_tools_still_filtered_by_grants(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    agent = make_agent(
        script=[answer()],
        tools=TOOLS,
        tool_search=True,
        tool_provider="tests.disclosure.conftest.weather_provider",
    )

    start_run(agent, alice, "what is the weather in Oslo?")

    assert recorder.names(0) == ["clock", "tool_search", "get_weather"]


def test_failing_provider_hook_adds_nothing_and_the_run_goes_on(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(
        script=[answer()], tools=TOOLS, tool_search=True, tool_provider="tests.disclosure.conftest.broken_provider"
    )

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED
    assert recorder.names(0) == ["clock", "tool_search"]


def test_provider_hook_must_be_one_administrators_listed(make_agent: Any) -> None:
    with pytest.raises(RunInputError, match="TOOL_PROVIDERS"):
        make_agent(script=[answer()], tools=TOOLS, tool_provider="os.system")
