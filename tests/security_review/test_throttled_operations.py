"""Every write that starts work or decides is throttled, wherever it comes from.

Before, starting runs and deciding approvals over the API were rate-limited, but retrying or
rolling back a run over the API, and deciding approvals in the admin (one by one or in bulk), were
not. The admin now counts its decisions against the API's ``decisions`` rate and counter.
"""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.cache import cache
from rest_framework.test import APIClient

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.helpers import action_confirmation, console, principal_for
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.models import Saga
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_throttle_cache() -> Iterator[None]:
    """Throttle counters live in the cache: start and end each test without any."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def rates(settings: Any) -> Callable[..., None]:
    """Set the throttle rates (the test settings make them too high to reach) and forget the counts so far."""

    def set_rates(**rates: str) -> None:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
        cache.clear()

    return set_rates


@pytest.fixture
def failed_run(alice_client: APIClient) -> AgentRun:
    """alice's run that failed for a retryable reason."""
    agent_create(name="greeter", provider="scripted", script=[{"content": "hello"}])
    started = alice_client.post("/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json")
    assert started.status_code == 201, started.content
    AgentRun.objects.filter(pk=started.json()["id"]).update(status=RunStatus.FAILED, retryable=True)
    return AgentRun.objects.get(pk=started.json()["id"])


@pytest.fixture
def hold(django_capture_on_commit_callbacks: Any) -> Callable[[User], ApprovalRequest]:
    def request(user: User) -> ApprovalRequest:
        with django_capture_on_commit_callbacks(execute=True):
            call = tool_call_request(
                request=CallRequest(
                    tool_name="risky_effect",
                    arguments={"note": "careful"},
                    principal=principal_for(user, tenant="acme"),
                    context=ToolContext(),
                )
            )
        return ApprovalRequest.objects.get(call=call)

    return request


def shown_messages(response: Any) -> str:
    return " ".join(str(message) for message in get_messages(response.wsgi_request))


def test_retrying_beyond_the_rate_answers_429_and_retries_nothing(
    alice_client: APIClient, failed_run: AgentRun, rates: Callable[..., None]
) -> None:
    # given one write per minute, spent on asking for a rollback (there is nothing to compensate)
    rates(runs="1/minute", decisions="100/minute")
    assert alice_client.post(f"/api/v1/runs/{failed_run.id}/rollback/").status_code == 409

    # when
    retried = alice_client.post(f"/api/v1/runs/{failed_run.id}/retry/")

    # then
    assert retried.status_code == 429
    assert int(retried["Retry-After"]) > 0
    failed_run.refresh_from_db()
    assert failed_run.status == RunStatus.FAILED


def test_rolling_back_beyond_the_rate_answers_429_but_its_progress_is_still_read(
    alice_client: APIClient, failed_run: AgentRun, rates: Callable[..., None]
) -> None:
    # given one write per minute, spent on retrying the run
    rates(runs="1/minute", decisions="100/minute")
    assert alice_client.post(f"/api/v1/runs/{failed_run.id}/retry/").status_code == 200

    # when
    rolled_back = alice_client.post(f"/api/v1/runs/{failed_run.id}/rollback/")

    # then: refused before anything was looked at; reading the rollback's progress is not throttled
    assert rolled_back.status_code == 429
    assert not Saga.objects.filter(key=str(failed_run.id)).exists()
    assert {alice_client.get(f"/api/v1/runs/{failed_run.id}/rollback/").status_code for _ in "abc"} == {404}


def test_admin_decisions_beyond_the_rate_say_so_and_decide_nothing(
    operator: User, alice: User, hold: Callable[[User], ApprovalRequest], rates: Callable[..., None]
) -> None:
    # given two pending requests, and one decision allowed per minute
    rates(runs="100/minute", decisions="1/minute")
    first, second = hold(alice), hold(alice)
    client = console(operator)
    client.post(f"/admin/approvals/approvalrequest/{first.pk}/approve/", {"comment": "ok"})
    assert ApprovalRequest.objects.get(pk=first.pk).status != ApprovalStatus.PENDING

    # when
    response = client.post(f"/admin/approvals/approvalrequest/{second.pk}/reject/", {"comment": "no"})

    # then: back to the request's page, with why; nothing decided
    assert response.status_code == 302
    assert response["Location"] == f"/admin/approvals/approvalrequest/{second.pk}/change/"
    assert "Nothing was recorded: you are deciding too fast" in shown_messages(response)
    assert ApprovalRequest.objects.get(pk=second.pk).status == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.filter(request=second).exists()


def test_the_admin_and_the_api_count_decisions_against_one_rate(
    operator: User, operator_client: APIClient, alice: User, hold: Callable[[User], ApprovalRequest], rates: Any
) -> None:
    # given one decision per minute, taken over the API
    rates(runs="100/minute", decisions="1/minute")
    first, second = hold(alice), hold(alice)
    assert operator_client.post(f"/api/v1/approvals/{first.pk}/approve/", {}, format="json").status_code == 200

    # when the same operator decides in the admin
    response = console(operator).post(f"/admin/approvals/approvalrequest/{second.pk}/approve/", {"comment": "ok"})

    # then
    assert "deciding too fast" in shown_messages(response)
    assert not ApprovalDecision.objects.filter(request=second).exists()


@pytest.mark.parametrize("action", ["approve_selected", "reject_selected"])
def test_bulk_decisions_count_one_by_one_and_stop_at_the_rate(
    action: str, operator: User, alice: User, hold: Callable[[User], ApprovalRequest], rates: Callable[..., None]
) -> None:
    # given three pending requests, and two decisions allowed per minute
    rates(runs="100/minute", decisions="2/minute")
    requests = sorted((hold(alice) for _ in "abc"), key=lambda item: item.pk)
    client = console(operator)
    # what the confirmation page posts back (each request bound to what it listed), with a comment
    form = {
        **action_confirmation(client, "/admin/approvals/approvalrequest/", action, [r.pk for r in requests]),
        "comment": "x",
    }

    # when
    response = client.post("/admin/approvals/approvalrequest/", form)

    # then: the first two are decided, the third is left pending and the operator is told
    statuses = [ApprovalRequest.objects.get(pk=item.pk).status for item in requests]
    assert ApprovalStatus.PENDING not in statuses[:2]
    assert statuses[2] == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.filter(request=requests[2]).exists()
    assert f"#{requests[2].pk} and the requests after it were not decided" in shown_messages(response)
