"""Sagas of agent runs (eager execution): compensate on error, the conversation is told, rollback API, admin."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from tests.helpers import action_confirmation
from tests.sagas.sample_tools import LOG, RELEASE_FAILS, TOOLS
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

TRIP = [
    {"content": "", "tool_calls": [{"name": "book", "arguments": {"item": "flight"}}]},
    {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
    {"content": "", "tool_calls": [{"name": "explode", "arguments": {"reason": "card declined"}}]},
    {"content": "Sorry: {last_tool_result}"},
]


@pytest.fixture(autouse=True)
def _tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 2, "SAGA_RETRY_BASE_SECONDS": 0.0}
    LOG.clear()
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS):
        yield


def _run(user: User, *, compensate_on_error: bool, script: list | None = None) -> AgentRun:
    agent = agent_create(
        name="trip" if compensate_on_error else "trip-plain",
        provider="scripted",
        script=script or TRIP,
        tools=["book", "reserve", "explode"],
        compensate_on_error=compensate_on_error,
    )
    run = run_start(agent=agent, user=user, input="book my trip")
    run.refresh_from_db()
    return run


def test_an_agent_that_compensates_on_error_undoes_the_completed_steps_and_tells_the_model(alice: User) -> None:
    # when the third step of the run fails
    run = _run(alice, compensate_on_error=True)

    # then both completed steps were undone, newest first, before the model's next turn
    assert run.status == RunStatus.COMPLETED, run.error
    assert [entry for entry in LOG if entry[0] in {"cancel", "release"}] == [
        ("release", "seat"),
        ("cancel", "B-flight"),
    ]
    steps = ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn")
    assert [c.status for c in steps] == [CallStatus.COMPENSATED, CallStatus.COMPENSATED, CallStatus.FAILED]
    assert ToolCall.objects.filter(run_id=run.id, kind=CallKind.COMPENSATION, status="succeeded").count() == 2
    assert Saga.objects.get(key=str(run.id)).status == SagaStatus.COMPENSATED

    # and the conversation says which step failed and which were rolled back, before the final answer
    roles = [m["role"] for m in run.messages]
    assert roles[-3:] == ["tool", "system", "assistant"]
    note = run.messages[-2]["content"]
    assert note.startswith('Step explode({"reason":"card declined"}) failed (exploded: card declined)')
    assert '- reserve({"item":"seat"}): rolled back (by release).' in note
    assert '- book({"item":"flight"}): rolled back (by cancel_booking).' in note
    assert note.index("reserve") < note.index("book(")
    assert run.output == "Sorry: exploded: card declined"
    assert AuditEvent.objects.filter(run_id=run.id, event_type="saga.rollback_reported").count() == 1


def test_without_compensate_on_error_nothing_is_undone_until_asked_over_the_api(alice: User, viewer: User) -> None:
    # given a completed run of an agent that does not compensate on error
    run = _run(alice, compensate_on_error=False)
    assert run.status == RunStatus.COMPLETED
    assert not [entry for entry in LOG if entry[0] in {"cancel", "release"}]
    saga = Saga.objects.get(key=str(run.id))
    assert saga.status == SagaStatus.OPEN
    assert list(saga.compensations.values_list("status", flat=True)) == ["recorded", "recorded"]

    client = APIClient()
    client.force_authenticate(alice)
    # when alice asks for a rollback
    response = client.post(f"/api/v1/runs/{run.id}/rollback/")

    # then it is accepted, the steps are undone newest first, and the finished run's conversation records it
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "compensated" and body["key"] == str(run.id)
    assert [(c["sequence"], c["step_tool"], c["status"]) for c in body["compensations"]] == [
        (2, "reserve", "succeeded"),
        (1, "book", "succeeded"),
    ]
    assert body["rollbacks"][0]["trigger"] == "on_demand" and body["rollbacks"][0]["requested_by"] == "user:alice"
    assert client.get(f"/api/v1/runs/{run.id}/rollback/").json()["status"] == "compensated"
    run.refresh_from_db()
    assert run.messages[-1]["role"] == "system"
    assert run.messages[-1]["content"].startswith("The completed steps were rolled back at the request of user:alice")

    # a second rollback has nothing left to do; someone else's run is not found
    assert client.post(f"/api/v1/runs/{run.id}/rollback/").status_code == 409
    other = APIClient()
    other.force_authenticate(User.objects.create_user("mallory"))
    assert other.post(f"/api/v1/runs/{run.id}/rollback/").status_code == 404


def _operator_client(operator: User) -> Client:
    operator.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="sagas", codename__in=["view_saga", "view_compensation", "operate_saga"]
        )
    )
    client = Client()
    client.force_login(operator)
    return client


def test_operators_see_sagas_that_need_attention_and_retry_or_resolve_them(alice: User, operator: User) -> None:
    # given a run whose release compensation failed for good, and a healthy saga
    RELEASE_FAILS["on"] = True
    run = _run(alice, compensate_on_error=True)
    from toolhub.sagas.recovery import sagas_sweep

    for _ in range(3):
        sagas_sweep()  # retries are due at once (base 0 s) and run in-process
    saga = Saga.objects.get(key=str(run.id))
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    failed = saga.compensations.get(step_tool="reserve")
    assert failed.status == CompensationStatus.FAILED and failed.attempts == 2
    healthy = Saga.objects.create(key="healthy", tenant="acme", status=SagaStatus.COMPENSATED)
    client = _operator_client(operator)

    # the list filter shows the one that needs attention
    listing = client.get("/admin/sagas/saga/?attention=yes")
    assert listing.status_code == 200
    assert str(run.id) in listing.content.decode() and "healthy" not in listing.content.decode()
    assert "healthy" in client.get("/admin/sagas/saga/?attention=no").content.decode()

    # the saga page shows steps, compensations, attempts and errors
    page = client.get(f"/admin/sagas/saga/{saga.pk}/change/").content.decode()
    assert "refused to release seat" in page and 'id="saga-attempts"' in page and "cancel_booking" in page
    assert client.get(f"/admin/sagas/compensation/{failed.pk}/change/").status_code == 200

    # resolve asks for a note first, then resolves through the service
    resolve = {"action": "resolve_selected", "_selected_action": [saga.pk, healthy.pk]}
    intermediate = client.post("/admin/sagas/saga/", resolve)
    assert intermediate.status_code == 200 and "action-with-comment-form" in intermediate.content.decode()

    # retry after the cause is fixed
    RELEASE_FAILS["on"] = False
    # retry lists what it will retry first; confirming retries exactly that
    confirmation = action_confirmation(client, "/admin/sagas/saga/", "retry_selected", [saga.pk])
    done = client.post("/admin/sagas/saga/", confirmation, follow=True)
    assert "1 compensation(s) retried." in done.content.decode()
    failed.refresh_from_db()
    assert failed.status == CompensationStatus.SUCCEEDED
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMPENSATED
    assert AuditEvent.objects.get(event_type="compensation.retry_requested").actor == "user:operator"


def test_resolving_by_hand_from_the_admin_records_the_note(alice: User, operator: User) -> None:
    RELEASE_FAILS["on"] = True
    run = _run(alice, compensate_on_error=True)
    from toolhub.sagas.recovery import sagas_sweep

    for _ in range(3):
        sagas_sweep()
    failed = Compensation.objects.get(saga__key=str(run.id), step_tool="reserve")
    client = _operator_client(operator)
    confirmation = action_confirmation(client, "/admin/sagas/compensation/", "resolve_selected", [failed.pk])
    done = client.post("/admin/sagas/compensation/", {**confirmation, "note": "released by phone"}, follow=True)
    assert "1 compensation(s) resolved." in done.content.decode()
    failed.refresh_from_db()
    assert failed.status == CompensationStatus.RESOLVED and failed.resolution_note == "released by phone"
    assert Saga.objects.get(key=str(run.id)).status == SagaStatus.RESOLVED


def test_operators_without_the_permission_get_no_actions(alice: User, viewer: User) -> None:
    viewer.user_permissions.add(*Permission.objects.filter(content_type__app_label="sagas", codename="view_saga"))
    client = Client()
    client.force_login(viewer)
    page = client.get("/admin/sagas/saga/").content.decode()
    assert "retry_selected" not in page and "resolve_selected" not in page
