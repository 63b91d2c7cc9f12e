"""The step's read of its run (SQL built once) gives the run as the ORM would, with its relations attached."""

import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents_app.models import Agent, AgentRun
from agents_app.steprows import locked_run
from toolhub.sagas.models import Saga

pytestmark = pytest.mark.django_db


def _values(instance: object) -> dict[str, object]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


@pytest.fixture
def run(alice: User) -> AgentRun:
    agent = Agent.objects.create(name="rows", script=[{"content": "hi"}], tools=["record_effect"])
    return AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", input="hi", messages=[{"role": "user", "content": "hi"}]
    )


def test_the_run_agent_provider_and_user_come_in_one_statement_as_the_orm_reads_them(run: AgentRun) -> None:
    expected = AgentRun.objects.select_related("agent", "agent__provider", "user").get(pk=run.pk)

    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        read = locked_run(run.pk)
        assert read is not None
        agent, provider, user = read.agent, read.agent.provider, read.user

    # one statement (the test's transaction makes the step's a savepoint)
    assert [q["sql"][:6] for q in queries.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))] == [
        "SELECT"
    ]
    assert _values(read) == _values(expected) and read.messages == [{"role": "user", "content": "hi"}]
    assert _values(agent) == _values(expected.agent) and agent.tools == ["record_effect"]
    assert _values(provider) == _values(expected.agent.provider)
    assert _values(user) == _values(expected.user)
    assert read.has_saga is False


def test_a_run_with_a_saga_says_so(run: AgentRun) -> None:
    Saga.objects.create(key=str(run.pk), run_id=run.pk, tenant="acme")
    with transaction.atomic():
        read = locked_run(run.pk)
    assert read is not None and read.has_saga is True


def test_a_run_whose_user_was_deleted_has_none_and_a_missing_run_is_none(run: AgentRun, alice: User) -> None:
    alice.delete()
    with transaction.atomic():
        read = locked_run(run.pk)
        assert read is not None and read.user is None and read.user_id is None
        assert locked_run(uuid.uuid4()) is None
