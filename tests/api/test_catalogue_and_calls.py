"""The tool catalogue, governed calls with their audit trail, the OpenAPI document and token auth."""

import functools
import json
import uuid
from collections.abc import Callable
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.helpers import RequestCall
from toolhub import ToolResult, registry, tool
from toolhub.audit import REDACTED
from toolhub.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def request_call(request_call: RequestCall) -> RequestCall:
    """These calls act for tenant acme."""
    return functools.partial(request_call, tenant="acme")


def test_the_tool_catalogue_shows_schemas(alice_client: APIClient) -> None:
    response = alice_client.get("/api/v1/tools/?page_size=500")

    assert response.status_code == 200
    tools = {item["name"]: item for item in response.json()["results"]}
    assert {"create_order", "calculate", "record_effect", "risky_effect"} <= set(tools)
    calculate = tools["calculate"]
    assert calculate["description"] == "Apply an arithmetic operation to two numbers."
    assert calculate["input_schema"]["type"] == "object"
    assert calculate["input_schema"]["required"] == ["a", "op", "b"]
    assert calculate["input_schema"]["properties"]["a"]["description"] == "The left operand."
    assert calculate["version"] == registry.get("calculate").version
    assert (tools["risky_effect"]["risk"], tools["risky_effect"]["effective_risk"]) == ("high", "high")
    assert all(item["enabled"] and item["present_in_code"] for item in tools.values())


def test_calls_are_listed_and_filtered(
    operator_client: APIClient, request_call: Callable[..., ToolCall], alice: User
) -> None:
    # given calls of two runs, of different tools and fates
    run_a, run_b = uuid.uuid4(), uuid.uuid4()
    ok = request_call("record_effect", {"note": "a"}, alice, run_a)
    held = request_call("risky_effect", {"note": "b"}, alice, run_a)
    bad = request_call("record_effect", {"note": 1}, alice, run_b)

    def ids(query: str) -> list[str]:
        response = operator_client.get(f"/api/v1/calls/{query}")
        assert response.status_code == 200, response.content
        return [item["id"] for item in response.json()["results"]]

    # then
    assert ids("") == [str(bad.id), str(held.id), str(ok.id)]
    assert ids(f"?run={run_a}") == [str(held.id), str(ok.id)]
    assert ids("?tool=record_effect") == [str(bad.id), str(ok.id)]
    assert ids("?status=invalid") == [str(bad.id)]
    assert ids(f"?run={run_a}&tool=record_effect&status=succeeded") == [str(ok.id)]
    assert ids("?tool=nothing_by_that_name") == []
    listed = operator_client.get("/api/v1/calls/?status=succeeded").json()["results"][0]
    assert (listed["tool"], listed["status"], listed["result"], listed["attempts"]) == (
        "record_effect",
        "succeeded",
        ok.result,
        1,
    )


@pytest.mark.parametrize(("query", "field"), [("?status=weird", "status"), ("?run=not-a-uuid", "run")])
def test_bad_call_filters_are_refused(operator_client: APIClient, query: str, field: str) -> None:
    response = operator_client.get(f"/api/v1/calls/{query}")

    assert response.status_code == 400
    assert field in response.json()


def test_a_call_with_its_audit_events(
    operator_client: APIClient, request_call: Callable[..., ToolCall], alice: User
) -> None:
    call = request_call("record_effect", {"note": "hello"}, alice)

    response = operator_client.get(f"/api/v1/calls/{call.id}/")

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["tool"], body["status"], body["arguments"]) == (
        str(call.id),
        "record_effect",
        "succeeded",
        {"note": "hello"},
    )
    events = body["audit_events"]
    assert [e["event_type"] for e in events] == ["call.requested", "call.queued", "call.running", "call.succeeded"]
    assert events[0]["actor"] == "user:alice"
    assert events[0]["data"]["arguments"] == {"note": "hello"}
    assert all(later["prev_hash"] == earlier["hash"] for earlier, later in zip(events, events[1:], strict=False))
    # the events are in the tenant's own chain: its staff read their places there, as those who cross tenants do
    assert len({e["chain"] for e in events}) == 1 and [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    platform = User.objects.create_user("platform", is_staff=True, is_superuser=True)
    platform_client = APIClient()
    platform_client.force_authenticate(platform)
    crossing = platform_client.get(f"/api/v1/calls/{call.id}/").json()["audit_events"]
    assert [e["hash"] for e in crossing] == [e["hash"] for e in events]
    assert [(e["chain"], e["seq"]) for e in crossing] == [(e["chain"], e["seq"]) for e in events]
    assert operator_client.get(f"/api/v1/calls/{uuid.uuid4()}/").status_code == 404


@tool(sensitive=("api_key",))
def fetch_report(name: str, api_key: str) -> str:
    """Fetch a report from a downstream system."""
    return f"report {name}"


def test_sensitive_arguments_are_redacted_in_the_api(
    operator_client: APIClient, request_call: Callable[..., ToolCall]
) -> None:
    with registry.temporarily(fetch_report):
        call = request_call("fetch_report", {"name": "q3", "api_key": "sk-very-secret"})
        listed = operator_client.get("/api/v1/calls/").content.decode()
        detail = operator_client.get(f"/api/v1/calls/{call.id}/")

    assert call.status == "succeeded"
    assert detail.json()["arguments"] == {"name": "q3", "api_key": REDACTED}
    assert "sk-very-secret" not in listed
    assert "sk-very-secret" not in detail.content.decode()


def test_the_openapi_document(alice_client: APIClient) -> None:
    response = alice_client.get("/api/schema/?format=json")

    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "toolhub API"
    for path in (
        "/api/v1/agents/",
        "/api/v1/runs/",
        "/api/v1/runs/{id}/",
        "/api/v1/runs/{id}/retry/",
        "/api/v1/approvals/",
        "/api/v1/approvals/{id}/approve/",
        "/api/v1/approvals/{id}/reject/",
        "/api/v1/tools/",
        "/api/v1/calls/",
        "/api/v1/calls/{id}/",
    ):
        assert path in document["paths"], path
    assert "post" in document["paths"]["/api/v1/runs/"]


def test_token_authentication(api_client: APIClient, alice: User) -> None:
    # given a token made with the management command
    out = StringIO()
    call_command("drf_create_token", "alice", stdout=out)
    key = out.getvalue().split()[2]
    assert len(key) == 40

    # when a client presents it
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = api_client.get("/api/v1/agents/")

    # then it is alice
    assert response.status_code == 200
    api_client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert api_client.get("/api/v1/agents/").status_code in (401, 403)
    api_client.credentials()
    assert api_client.get("/api/v1/tools/").status_code in (401, 403)


def test_users_see_only_their_own_calls(
    bob_client: APIClient,
    alice_client: APIClient,
    operator_client: APIClient,
    request_call: Callable[..., ToolCall],
    alice: User,
) -> None:
    # given a call of alice's (tenant acme)
    call = request_call("record_effect", {"note": "acme's business"}, alice)

    # then bob (another tenant, not staff) sees nothing of it; alice and the operators do
    assert bob_client.get("/api/v1/calls/").json()["results"] == []
    assert bob_client.get(f"/api/v1/calls/{call.id}/").status_code == 404
    assert [c["id"] for c in alice_client.get("/api/v1/calls/").json()["results"]] == [str(call.id)]
    assert alice_client.get(f"/api/v1/calls/{call.id}/").status_code == 200
    assert operator_client.get(f"/api/v1/calls/{call.id}/").status_code == 200


@tool
def export_report(name: str) -> ToolResult:
    """Export a report as a file."""
    return ToolResult.artifact(f"report {name}", name=f"{name}.txt", media_type="text/plain")


def test_artifacts_download_only_for_those_who_see_the_call(
    alice_client: APIClient, bob_client: APIClient, request_call: Callable[..., ToolCall], alice: User
) -> None:
    with registry.temporarily(export_report):
        call = request_call("export_report", {"name": "q3"}, alice)
    artifact_id = call.artifacts.get().pk
    url = f"/api/v1/calls/{call.id}/artifacts/{artifact_id}/"

    mine = alice_client.get(url)

    assert mine.status_code == 200
    assert mine.content == b"report q3"
    assert mine["Content-Disposition"] == 'attachment; filename="q3.txt"'
    assert bob_client.get(url).status_code == 404
