"""Bounded lists and throttled writes: a paginated catalogue; starting runs and deciding approvals rate-limited."""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_create
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.api.conftest import client_for
from tests.helpers import principal_for
from toolhub.models import ToolDefinition
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_throttle_cache")]

SCRIPT = [{"content": "hello"}]


@pytest.fixture
def rates(settings: Any) -> Callable[..., None]:
    """Set the throttle rates (the test settings make them too high to reach)."""

    def set_rates(**rates: str) -> None:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}

    return set_rates


@pytest.fixture
def greeter(db: None) -> Agent:
    return agent_create(name="greeter", provider="scripted", script=SCRIPT)


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


def test_starting_runs_beyond_the_rate_answers_429_and_starts_nothing(
    alice_client: APIClient, greeter: Agent, rates: Callable[..., None], operator: User
) -> None:
    # given
    rates(runs="2/minute", decisions="100/minute")
    started = [alice_client.post("/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json") for _ in "ab"]

    # when
    third = alice_client.post("/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json")

    # then
    assert [response.status_code for response in started] == [201, 201]
    assert third.status_code == 429
    assert "Request was throttled" in third.json()["detail"]
    assert int(third["Retry-After"]) > 0
    assert AgentRun.objects.count() == 2
    # the limit is per user: another user still starts runs
    assert (
        client_for(operator).post("/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json").status_code
        == 201
    )


def test_decisions_beyond_the_rate_answer_429_and_decide_nothing(
    operator_client: APIClient, hold: Callable[[User], ApprovalRequest], alice: User, rates: Callable[..., None]
) -> None:
    # given two pending requests, and one decision allowed per minute
    rates(runs="100/minute", decisions="1/minute")
    first, second = hold(alice), hold(alice)
    approved = operator_client.post(f"/api/v1/approvals/{first.pk}/approve/", {"comment": "ok"}, format="json")

    # when
    rejected = operator_client.post(f"/api/v1/approvals/{second.pk}/reject/", {"comment": "no"}, format="json")

    # then
    assert approved.status_code == 200
    assert rejected.status_code == 429
    second.refresh_from_db()
    assert second.status == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.filter(request=second).exists()


def test_reads_are_not_throttled(alice_client: APIClient, rates: Callable[..., None]) -> None:
    rates(runs="1/minute", decisions="1/minute")

    statuses = {alice_client.get("/api/v1/approvals/").status_code for _ in range(5)}

    assert statuses == {200}


def test_the_tool_catalogue_is_paginated_by_name(alice_client: APIClient) -> None:
    # given the catalogue the test app registers (ToolDefinition rows are synced from code)
    names = list(ToolDefinition.objects.filter(present_in_code=True).order_by("name").values_list("name", flat=True))
    assert len(names) > 3

    # when: the pages, followed one by one
    seen: list[str] = []
    page = alice_client.get("/api/v1/tools/?page_size=3").json()
    while True:
        assert len(page["results"]) <= 3
        seen += [tool["name"] for tool in page["results"]]
        if not page["next"]:
            break
        page = alice_client.get(page["next"]).json()

    # then
    assert seen == names


def test_a_page_is_bounded_however_large_the_request(operator_client: APIClient) -> None:
    # given a catalogue of more than 500 tools, listed whole to a catalogue role
    ToolDefinition.objects.bulk_create(ToolDefinition(name=f"bulk_tool_{number:04}") for number in range(600))

    # when
    default = operator_client.get("/api/v1/tools/")
    huge = operator_client.get("/api/v1/tools/?page_size=1000000")

    # then
    assert (default.status_code, huge.status_code) == (200, 200)
    assert len(default.json()["results"]) == 50
    assert len(huge.json()["results"]) == 500
    assert huge.json()["next"]


def test_the_provider_exports_stay_whole(alice_client: APIClient) -> None:
    exported = alice_client.get("/api/v1/tools/export/openai/?page_size=1")

    assert exported.status_code == 200
    assert isinstance(exported.json(), list)
    assert len(exported.json()) == len(registry.names()) > 1
