"""The worker's re-check of an agent's tools is cached with governance: a changed agent applies to the next call."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_update
from toolhub.authorization import principal_of_call

pytestmark = pytest.mark.django_db


def _tools_of(run: AgentRun) -> frozenset[str] | None:
    principal = principal_of_call(user_id=run.user_id, tenant=run.tenant, agent_name=run.agent.name, run_id=run.pk)
    return principal.agent_tools


def _agent_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if '"agents_app_agent' in q["sql"]]


@pytest.fixture
def run(alice: User) -> AgentRun:
    agent = Agent.objects.create(name="cached", tools=["record_effect", "risky_effect"])
    return AgentRun.objects.create(agent=agent, user=alice, tenant="acme", input="hi")


def test_an_unchanged_agent_is_not_read_again(run: AgentRun) -> None:
    # given a first re-check that loaded the agent's tools
    assert _tools_of(run) == {"record_effect", "risky_effect"}

    # when the next call of the run is re-checked with nothing changed
    with CaptureQueriesContext(connection) as queries:
        tools = _tools_of(run)

    # then it read the governance stamp and not the agent
    assert tools == {"record_effect", "risky_effect"}
    assert _agent_reads(queries) == []
    assert sum("toolhub_governanceversion" in q["sql"] for q in queries.captured_queries) == 1


def test_a_tool_taken_from_the_agent_between_two_calls_is_gone_for_the_second(run: AgentRun) -> None:
    # given a re-check that cached the agent's two tools
    assert "risky_effect" in _tools_of(run)

    # when an administrator takes one tool away
    agent_update(agent=run.agent, changes={"tools": ["record_effect"]}, changed_by=None)

    # then the very next re-check sees the change
    assert _tools_of(run) == {"record_effect"}


def test_a_bulk_update_or_a_deletion_of_the_agent_applies_to_the_next_call(run: AgentRun) -> None:
    assert _tools_of(run) == {"record_effect", "risky_effect"}

    # an UPDATE that bypasses the services (as raw SQL or a bulk update would)
    Agent.objects.filter(pk=run.agent_id).update(tools=[])
    assert _tools_of(run) == frozenset()

    # an agent renamed away from the call's agent name: the run no longer names it
    Agent.objects.filter(pk=run.agent_id).update(name="renamed", tools=["record_effect"])
    assert _tools_of(run) == frozenset()
