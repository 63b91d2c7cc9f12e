"""The decision path's and the loop step's statements are prepared by the server, and read the same either way.

An approval locks its request and reads its decisions; a loop step locks its run and reads its turn's calls,
then moves the run with a guarded UPDATE. Each repeats on every call, so each is bound and prepared by the
server once per connection (``toolhub.prepared``), like the audited writes; with ``PREPARED_STATEMENTS`` off
(a pooler that cannot keep prepared statements) or on SQLite they go through Django's usual cursor.
"""

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.steprows import locked_run, turn_calls
from agents_app.transitions import RUN_TRANSITIONS
from approvals.models import ApprovalRequest
from approvals.rows import locked_request, request_decisions
from tests.approvals.conftest import Hold
from toolhub.models.governance import GovernanceVersion
from toolhub.transitions import guarded_save

pytestmark = pytest.mark.django_db

#: More executions than psycopg waits for before it prepares a statement.
REPEATS = 4


def _values(instance: object) -> dict[str, object]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def _prepared_statements(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", [f'%"{table}"%'])
        return cursor.fetchone()[0]


@pytest.fixture(params=[True, False], ids=["prepared", "client-bound"])
def prepared(request: pytest.FixtureRequest, settings: object) -> bool:
    settings.TOOLHUB = {**settings.TOOLHUB, "PREPARED_STATEMENTS": request.param}  # type: ignore[attr-defined]
    return bool(request.param)


@pytest.fixture
def run(alice: User) -> AgentRun:
    agent = Agent.objects.create(name="prepared", script=[{"content": "hi"}], tools=["record_effect"])
    return AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", input="hi", messages=[{"role": "user", "content": "hi"}]
    )


def test_a_request_and_its_decisions_read_as_the_orm_reads_them(prepared: bool, hold: Hold) -> None:
    request = hold()
    expected = ApprovalRequest.objects.select_related("call").get(pk=request.pk)

    with transaction.atomic():
        reads = [(locked_request(request.pk), request_decisions(request)) for _ in range(REPEATS)]

    stamp = GovernanceVersion.objects.values_list("stamp", flat=True).first()
    for read, (decisions, read_stamp) in reads:
        assert _values(read) == _values(expected) and _values(read.call) == _values(expected.call)
        assert decisions == [] and read_stamp == stamp
    if prepared and connection.vendor == "postgresql":
        assert _prepared_statements(ApprovalRequest._meta.db_table) >= 1
    with pytest.raises(ApprovalRequest.DoesNotExist), transaction.atomic():
        locked_request(request.pk + 1000)


def test_a_run_and_its_turn_read_and_move_the_same_prepared_or_not(prepared: bool, run: AgentRun) -> None:
    expected = _values(AgentRun.objects.get(pk=run.pk))

    with transaction.atomic():
        reads = [locked_run(run.pk) for _ in range(REPEATS)]
        calls = [turn_calls(run) for _ in range(REPEATS)]

    assert all(read is not None and _values(read) == expected for read in reads)
    assert calls == [[]] * REPEATS
    for index in range(REPEATS):
        # a step's guarded move of its run, the same statement each time: only the first one moves it
        run.messages = [*run.messages, {"role": "assistant", "content": f"step {index}"}]
        moved = guarded_save(run, table=RUN_TRANSITIONS, to=RunStatus.COMPLETED, allowed_from={RunStatus.RUNNING})
        assert moved is (index == 0)
    stored = AgentRun.objects.get(pk=run.pk)
    assert stored.status == RunStatus.COMPLETED and stored.messages[-1] == {"role": "assistant", "content": "step 0"}
    if prepared and connection.vendor == "postgresql":
        assert _prepared_statements(AgentRun._meta.db_table) >= 1
