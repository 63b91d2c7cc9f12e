"""Tool groups and grants: who may call what, checked at listing, request and execution."""

import pytest
from django.contrib.auth.models import Group, User

from agents_app.loop import visible_tool_definitions
from agents_app.models import Agent, AgentRun
from tests.helpers import for_a_worker, principal_for
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolDefinition, ToolGroup
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("deny_by_default")]


def _group(*tools: str, name: str = "effects") -> ToolGroup:
    # No capabilities: those need their own permission (tests/disclosure/test_groups.py); these tests are about grants.
    return ToolGroup.objects.create(name=name, extra_tools=list(tools))


def test_without_a_grant_the_call_is_denied_recorded_and_not_executed(request_call) -> None:
    call = request_call("record_effect", {"note": "x"})
    assert call.status == CallStatus.DENIED
    assert "not granted to you" in call.error
    assert SideEffect.objects.count() == 0
    assert verify_audit_chains()[1] == []


def test_a_grant_to_the_tenant_allows_its_members(request_call, tenant: Tenant) -> None:
    Grant.objects.create(tool_group=_group("record_effect"), tenant=tenant)
    call = request_call("record_effect", {"note": "x"})
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert SideEffect.objects.count() == 1


def test_a_grant_to_a_django_group_allows_its_members(request_call, alice: User) -> None:
    analysts = Group.objects.create(name="analysts")
    alice.groups.add(analysts)
    Grant.objects.create(tool_name="record_effect", group=analysts)
    call = request_call("record_effect", {"note": "x"})
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED


def test_deny_wins_over_allow(request_call, tenant: Tenant, alice: User) -> None:
    Grant.objects.create(tool_group=_group("record_effect"), tenant=tenant)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", user=alice)
    call = request_call("record_effect", {"note": "x"})
    assert call.status == CallStatus.DENIED
    assert "denied to you" in call.error
    assert SideEffect.objects.count() == 0


def test_an_agent_needs_the_tool_in_its_list_or_a_grant_and_a_deny_to_it_wins(request_call, tenant: Tenant) -> None:
    Grant.objects.create(tool_group=_group("record_effect"), tenant=tenant)
    # not in the agent's list, no grant to the agent
    assert (
        request_call("record_effect", {"note": "a"}, agent_name="bot", agent_tools=frozenset()).status
        == CallStatus.DENIED
    )
    # an allow grant to the agent stands for the list
    Grant.objects.create(tool_name="record_effect", agent_name="bot")
    assert (
        request_call("record_effect", {"note": "b"}, agent_name="bot", agent_tools=frozenset()).status
        != CallStatus.DENIED
    )
    # a deny to the agent wins over its list
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="bot")
    denied = request_call("record_effect", {"note": "c"}, agent_name="bot", agent_tools=frozenset({"record_effect"}))
    assert denied.status == CallStatus.DENIED and "denied to agent" in denied.error


def test_a_run_sees_only_tools_both_its_agent_and_its_user_may_use(alice: User, tenant: Tenant) -> None:
    Grant.objects.create(tool_group=_group("record_effect", "always_fails"), tenant=tenant)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="always_fails", user=alice)
    agent = Agent.objects.create(name="bot", tools=["record_effect", "always_fails", "crashes"])
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", input="hi")
    names = [definition["function"]["name"] for definition in visible_tool_definitions(run)]
    # crashes: no grant; always_fails: denied to alice; record_effect: allowed on both sides
    assert names == ["record_effect"]


@pytest.mark.django_db(transaction=False)  # on_commit callbacks are captured only inside the test's transaction
def test_the_worker_checks_the_grant_again_when_the_call_executes(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks
) -> None:
    grant = Grant.objects.create(tool_group=_group("record_effect"), tenant=tenant)
    with for_a_worker(), django_capture_on_commit_callbacks(execute=False) as dispatches:
        call = tool_call_request(
            request=CallRequest(
                tool_name="record_effect",
                arguments={"note": "x"},
                principal=principal_for(alice, tenant="acme"),
                context=ToolContext(tenant="acme"),
            )
        )
    assert call.status == CallStatus.QUEUED
    grant.delete()  # revoked while the call waited for a worker
    for dispatch in dispatches:
        dispatch()
    call.refresh_from_db()
    assert call.status == CallStatus.DENIED
    assert SideEffect.objects.count() == 0


def test_a_tool_disabled_by_an_operator_is_denied(request_call, tenant: Tenant) -> None:
    Grant.objects.create(tool_group=_group("record_effect"), tenant=tenant)
    ToolDefinition.objects.filter(name="record_effect").update(enabled=False)
    call = request_call("record_effect", {"note": "x"})
    assert call.status == CallStatus.DENIED and "disabled by an operator" in call.error


def test_a_model_passing_another_tenants_id_is_denied(request_call, tenant: Tenant, other_tenant: Tenant) -> None:
    from toolhub.tools.definition import Tool

    def tenant_report(tenant_id: str) -> str:
        """Report on a tenant."""
        return tenant_id

    from toolhub.tools.registry import registry

    with registry.temporarily(Tool.from_function(tenant_report)):
        Grant.objects.create(tool_name="tenant_report", tenant=tenant)
        own = request_call("tenant_report", {"tenant_id": "acme"})
        other = request_call("tenant_report", {"tenant_id": "globex"})
    own.refresh_from_db()
    assert own.status == CallStatus.SUCCEEDED
    assert other.status == CallStatus.DENIED and "your own tenant" in other.error


@pytest.mark.django_db(transaction=False)  # on_commit callbacks are captured only inside the test's transaction
def test_a_call_whose_stored_arguments_no_longer_fit_the_tool_is_refused_on_the_worker(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks
) -> None:
    from toolhub.tools.definition import Tool
    from toolhub.tools.registry import registry

    runs: list[str] = []

    def note(text: str) -> str:
        """Take a note."""
        runs.append(text)
        return text

    def note_v2(count: int) -> str:
        """Take a note, counted."""
        runs.append(str(count))
        return str(count)

    Grant.objects.create(tool_name="note", tenant=tenant)
    with registry.temporarily(Tool.from_function(note)):
        with for_a_worker(), django_capture_on_commit_callbacks(execute=False) as dispatches:
            call = tool_call_request(
                request=CallRequest(
                    tool_name="note",
                    arguments={"text": "hi"},
                    principal=principal_for(alice, tenant="acme"),
                    context=ToolContext(tenant="acme"),
                )
            )
    # the tool is redeployed with other parameters before a worker picks the call up
    with registry.temporarily(Tool.from_function(note_v2, name="note")):
        for dispatch in dispatches:
            dispatch()
    call.refresh_from_db()
    assert call.status == CallStatus.DENIED
    assert "no longer match tool 'note'" in call.error
    assert runs == []
