"""Rolling a run back undoes its subagents' steps too: each descendant run's saga is rolled back with it.

Found (review be, 2026-12-05): a run's saga holds only its own calls and a subagent's steps are its child
run's, so ``POST /api/v1/runs/{parent}/rollback/`` left what the subagents did in place, and answered 409
"Nothing to roll back" when only they had done something undoable. Expect: the run's and its descendants'
sagas (any depth) are rolled back, each its own steps newest first; 409 only when none has anything left.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import AgentRun, RunStatus
from agents_app.rollbacks import run_descendant_ids
from tests.helpers import assert_audit_intact
from tests.sagas.sample_tools import LOG, TOOLS
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.tools import ask_researcher
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Saga, SagaStatus
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

CHILD_BOOKS = [
    {"content": "", "tool_calls": [{"name": "book", "arguments": {"item": "flight"}}]},
    {"content": "booked: {last_tool_result}"},
]


def _parent_script(*, own_step: bool = False) -> list[dict[str, Any]]:
    own = [{"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]}] if own_step else []
    return [
        *own,
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "book a flight"}}]},
        {"content": "Parent got: {last_tool_result}"},
    ]


@pytest.fixture(autouse=True)
def _tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 2, "SAGA_RETRY_BASE_SECONDS": 0.0}
    LOG.clear()
    with registry.temporarily(ask_researcher, *TOOLS):
        yield


def _family(
    make_agent: MakeAgent, start: StartRun, alice: User, *, own_step: bool = False
) -> tuple[AgentRun, AgentRun]:
    """A completed parent run whose subagent (the researcher) booked a flight (a compensable step)."""
    make_agent(name="researcher", tools=["book"], script=CHILD_BOOKS)
    parent = start(make_agent(tools=["ask_researcher", "reserve"], script=_parent_script(own_step=own_step)), alice)
    child = AgentRun.objects.get(parent_run=parent)
    assert (parent.status, child.status) == (RunStatus.COMPLETED, RunStatus.COMPLETED), (parent.error, child.error)
    return parent, child


def _post(client: APIClient, run: AgentRun, capture: Any) -> Any:
    with capture(execute=True):
        return client.post(f"/api/v1/runs/{run.id}/rollback/")


def _cancellations() -> list[tuple[str, str]]:
    return [entry for entry in LOG if entry[0] in {"cancel", "release"}]


def test_rolling_back_a_parent_compensates_its_subagents_step(
    make_agent: MakeAgent,
    start: StartRun,
    alice: User,
    alice_client: APIClient,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the parent's rollback answered 409 and left the child's booking. Expect: the booking is cancelled."""
    parent, child = _family(make_agent, start, alice)
    assert not Saga.objects.filter(run_id=parent.id).exists()

    response = _post(alice_client, parent, django_capture_on_commit_callbacks)

    assert response.status_code == 202, response.content
    body = response.json()
    # the top level is the run's own saga: empty, as the parent did nothing undoable itself
    assert (body["key"], body["run_id"], body["status"]) == (str(parent.id), str(parent.id), "open")
    assert (body["compensations"], body["rollbacks"], body["created_at"]) == ([], [], None)
    [child_saga] = body["subagent_sagas"]  # accepted: its compensation starts once the request committed
    assert (child_saga["key"], child_saga["status"]) == (str(child.id), "compensating")
    assert child_saga["rollbacks"][0]["requested_by"] == "user:alice"
    assert _cancellations() == [("cancel", "B-flight")]
    assert ToolCall.objects.get(run_id=child.id, kind=CallKind.CALL).status == CallStatus.COMPENSATED

    # auditors see who asked and through which run, in the child's saga events
    requested = AuditEvent.objects.get(run_id=child.id, event_type="saga.rollback_requested")
    assert requested.actor == "user:alice" and requested.payload["through_run"] == str(parent.id)
    # the child's conversation is told, as for any rollback asked after a run ended
    child.refresh_from_db()
    assert child.messages[-1]["content"].startswith("The completed steps were rolled back at the request of user:alice")

    # GET shows the descendants' sagas; a second rollback has nothing left (nothing compensated twice)
    shown = alice_client.get(f"/api/v1/runs/{parent.id}/rollback/")
    assert shown.status_code == 200 and shown.json()["key"] == str(parent.id)
    [child_saga] = shown.json()["subagent_sagas"]
    assert (child_saga["key"], child_saga["status"]) == (str(child.id), "compensated")
    assert [(c["step_tool"], c["status"]) for c in child_saga["compensations"]] == [("book", "succeeded")]
    again = _post(alice_client, parent, django_capture_on_commit_callbacks)
    assert again.status_code == 409 and "subagents" in again.json()["detail"]
    assert _cancellations() == [("cancel", "B-flight")]
    assert assert_audit_intact() > 0


def test_the_parents_own_steps_and_its_subagents_are_rolled_back_together(
    make_agent: MakeAgent,
    start: StartRun,
    alice: User,
    alice_client: APIClient,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: only the parent's own step was undone. Expect: both the parent's and the child's steps."""
    parent, child = _family(make_agent, start, alice, own_step=True)

    response = _post(alice_client, parent, django_capture_on_commit_callbacks)

    assert response.status_code == 202, response.content
    body = response.json()
    assert [c["step_tool"] for c in body["compensations"]] == ["reserve"]
    assert [s["key"] for s in body["subagent_sagas"]] == [str(child.id)]
    shown = alice_client.get(f"/api/v1/runs/{parent.id}/rollback/").json()
    assert (shown["key"], shown["status"]) == (str(parent.id), "compensated")
    assert [(s["key"], s["status"]) for s in shown["subagent_sagas"]] == [(str(child.id), "compensated")]
    assert sorted(_cancellations()) == [("cancel", "B-flight"), ("release", "seat")]
    own = AuditEvent.objects.get(run_id=parent.id, event_type="saga.rollback_requested")
    assert "through_run" not in own.payload


def test_a_child_rolled_back_already_is_not_compensated_again(
    make_agent: MakeAgent,
    start: StartRun,
    alice: User,
    alice_client: APIClient,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: -. Expect: the parent's rollback finds nothing left (409) once the child was rolled back itself."""
    parent, child = _family(make_agent, start, alice)
    assert _post(alice_client, child, django_capture_on_commit_callbacks).status_code == 202

    response = _post(alice_client, parent, django_capture_on_commit_callbacks)

    assert response.status_code == 409, response.content
    assert _cancellations() == [("cancel", "B-flight")]
    assert Saga.objects.get(run_id=child.id).rollbacks.count() == 1


def test_others_may_not_roll_back_the_parent_nor_reach_its_subagents(
    make_agent: MakeAgent,
    start: StartRun,
    alice: User,
    viewer: User,
    other_tenant: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: -. Expect: another user 404, an auditor of the tenant 403, and nothing of the subtree undone."""
    parent, child = _family(make_agent, start, alice)
    stranger = APIClient()
    stranger.force_authenticate(User.objects.create_user("mallory"))
    auditor = APIClient()
    auditor.force_authenticate(viewer)

    assert _post(stranger, parent, django_capture_on_commit_callbacks).status_code == 404
    assert stranger.get(f"/api/v1/runs/{parent.id}/rollback/").status_code == 404
    assert _post(auditor, parent, django_capture_on_commit_callbacks).status_code == 403
    assert _cancellations() == []
    assert Saga.objects.get(run_id=child.id).status == SagaStatus.OPEN


def test_a_run_of_another_tenant_linked_as_a_child_is_never_followed(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: -. Expect: the walk keeps to the run's tenant, whatever a row's parent says."""
    parent, child = _family(make_agent, start, alice)
    grandchild = AgentRun.objects.create(agent=child.agent, user=alice, tenant="acme", input="x", parent_run=child)
    AgentRun.objects.create(agent=child.agent, user=alice, tenant="globex", input="x", parent_run=child)

    assert run_descendant_ids(parent) == [child.id, grandchild.id]
