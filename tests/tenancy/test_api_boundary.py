"""The tenant boundary over the API: another tenant's id answers exactly like a missing one, and changes nothing.

Staff status and the operators' permissions never widen it; a superuser and ``toolhub.cross_tenant`` do.
"""

from collections.abc import Callable
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.response import Response
from rest_framework.test import APIClient

from approvals.models import ApprovalStatus
from demo.models import Account
from tests.tenancy.conftest import AcmeData, database_state, random_uuid
from toolhub.models import CallStatus, TenantMembership, ToolCall
from toolhub.sagas.models import SagaStatus

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_APPROVAL = 987654321

#: (name, method, URL for acme's row, URL for a missing row, body)
Endpoint = tuple[str, str, Callable[[AcmeData], str], Callable[[], str], dict]
ENDPOINTS: list[Endpoint] = [
    (
        "call detail",
        "get",
        lambda a: f"/api/v1/calls/{a.artifact_call.id}/",
        lambda: f"/api/v1/calls/{random_uuid()}/",
        {},
    ),
    (
        "call result",
        "post",
        lambda a: f"/api/v1/calls/{a.external_call.id}/result/",
        lambda: f"/api/v1/calls/{random_uuid()}/result/",
        {"result": {"name": "Mallory"}},
    ),
    (
        "artifact",
        "get",
        lambda a: f"/api/v1/calls/{a.artifact_call.id}/artifacts/{a.artifact.pk}/",
        lambda: f"/api/v1/calls/{random_uuid()}/artifacts/{MISSING_APPROVAL}/",
        {},
    ),
    (
        "approval detail",
        "get",
        lambda a: f"/api/v1/approvals/{a.approval.pk}/",
        lambda: f"/api/v1/approvals/{MISSING_APPROVAL}/",
        {},
    ),
    (
        "approve",
        "post",
        lambda a: f"/api/v1/approvals/{a.approval.pk}/approve/",
        lambda: f"/api/v1/approvals/{MISSING_APPROVAL}/approve/",
        {"comment": "ok"},
    ),
    (
        "approve with edited arguments",
        "post",
        lambda a: f"/api/v1/approvals/{a.approval.pk}/approve/",
        lambda: f"/api/v1/approvals/{MISSING_APPROVAL}/approve/",
        {"comment": "cheaper", "arguments": {"amount": "1"}},
    ),
    (
        "reject",
        "post",
        lambda a: f"/api/v1/approvals/{a.approval.pk}/reject/",
        lambda: f"/api/v1/approvals/{MISSING_APPROVAL}/reject/",
        {"comment": "no"},
    ),
    ("run detail", "get", lambda a: f"/api/v1/runs/{a.ledger_run.id}/", lambda: f"/api/v1/runs/{random_uuid()}/", {}),
    (
        "run retry",
        "post",
        lambda a: f"/api/v1/runs/{a.ledger_run.id}/retry/",
        lambda: f"/api/v1/runs/{random_uuid()}/retry/",
        {},
    ),
    (
        "run rollback (read)",
        "get",
        lambda a: f"/api/v1/runs/{a.ledger_run.id}/rollback/",
        lambda: f"/api/v1/runs/{random_uuid()}/rollback/",
        {},
    ),
    (
        "run rollback",
        "post",
        lambda a: f"/api/v1/runs/{a.ledger_run.id}/rollback/",
        lambda: f"/api/v1/runs/{random_uuid()}/rollback/",
        {},
    ),
]
ENDPOINT_IDS = [endpoint[0] for endpoint in ENDPOINTS]


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def send(client: APIClient, method: str, url: str, body: dict) -> Response:
    return client.post(url, body, format="json") if method == "post" else client.get(url)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
@pytest.mark.parametrize("who", ["auditor", "operator", "user"])
def test_another_tenants_row_answers_like_a_missing_one_and_nothing_changes(
    endpoint: Endpoint, who: str, acme: AcmeData, globex_people: dict[str, User]
) -> None:
    # given acme's data and a person of globex (staff auditor, operator, plain user)
    _, method, acme_url, missing_url, body = endpoint
    client = client_for(globex_people[who])
    before = database_state()

    # when they reach for acme's row, and for a row that does not exist
    foreign = send(client, method, acme_url(acme), body)
    missing = send(client, method, missing_url(), body)

    # then both answers are the same 404, and nothing in the database moved (no decision, no money, no audit)
    assert foreign.status_code == 404, foreign.content
    assert missing.status_code == 404, missing.content
    assert foreign.content == missing.content
    assert database_state() == before


@pytest.mark.parametrize("who", ["acme_operator", "superuser", "platform_user"])
def test_acmes_staff_and_people_across_the_boundary_see_acmes_rows(
    who: str, acme: AcmeData, request: pytest.FixtureRequest
) -> None:
    client = client_for(request.getfixturevalue(who))

    assert client.get(f"/api/v1/calls/{acme.artifact_call.id}/").status_code == 200
    assert client.get(f"/api/v1/calls/{acme.artifact_call.id}/artifacts/{acme.artifact.pk}/").content == (
        b"acme report q3"
    )
    assert client.get(f"/api/v1/approvals/{acme.approval.pk}/").json()["tenant"] == "acme"
    assert client.get(f"/api/v1/runs/{acme.ledger_run.id}/").json()["tenant"] == "acme"
    assert client.get(f"/api/v1/runs/{acme.ledger_run.id}/rollback/").json()["status"] == SagaStatus.OPEN
    # visible, so the retry of a completed run is refused for what it is, not hidden
    assert client.post(f"/api/v1/runs/{acme.ledger_run.id}/retry/").status_code == 409
    listed_calls = {c["id"] for c in client.get("/api/v1/calls/?page_size=100").json()["results"]}
    assert {str(acme.artifact_call.id), str(acme.external_call.id)} <= listed_calls
    listed_approvals = {a["id"] for a in client.get("/api/v1/approvals/").json()["results"]}
    assert acme.approval.pk in listed_approvals


@pytest.mark.parametrize("who", ["auditor", "operator", "user"])
def test_lists_show_no_row_of_another_tenant(who: str, acme: AcmeData, globex_people: dict[str, User]) -> None:
    client = client_for(globex_people[who])

    assert client.get("/api/v1/calls/").json()["results"] == []
    assert client.get(f"/api/v1/calls/?run={acme.ledger_run.id}").json()["results"] == []
    assert client.get("/api/v1/approvals/?status=pending").json()["results"] == []


def test_a_plain_member_sees_only_their_own_rows_inside_their_tenant(alice: User, carol: User, acme: AcmeData) -> None:
    alice_client, carol_client = client_for(alice), client_for(carol)

    # alice sees her own rows
    assert alice_client.get(f"/api/v1/runs/{acme.ledger_run.id}/").status_code == 200
    assert alice_client.get(f"/api/v1/approvals/{acme.approval.pk}/").status_code == 200
    # carol, of the same tenant but not staff, sees none of them
    assert carol_client.get(f"/api/v1/runs/{acme.ledger_run.id}/").status_code == 404
    assert carol_client.get(f"/api/v1/calls/{acme.artifact_call.id}/").status_code == 404
    assert carol_client.get("/api/v1/calls/").json()["results"] == []

    # once alice leaves acme, her acme rows are out of her reach too
    TenantMembership.objects.filter(user=alice).delete()
    alice_client = client_for(User.objects.get(pk=alice.pk))
    assert alice_client.get(f"/api/v1/runs/{acme.ledger_run.id}/").status_code == 404
    assert alice_client.get(f"/api/v1/calls/{acme.artifact_call.id}/").status_code == 404


def test_the_operator_of_another_tenant_cannot_approve_but_acmes_operator_can(
    acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    before = database_state()

    refused = client_for(globex_operator).post(f"/api/v1/approvals/{acme.approval.pk}/approve/", {}, format="json")

    assert refused.status_code == 404
    assert database_state() == before
    approved = client_for(acme_operator).post(f"/api/v1/approvals/{acme.approval.pk}/approve/", {}, format="json")
    assert approved.status_code == 200, approved.content
    assert approved.json()["status"] == ApprovalStatus.APPROVED


def test_the_operator_of_another_tenant_cannot_roll_back_but_acmes_operator_can(
    acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("900")
    before = database_state()

    refused = client_for(globex_operator).post(f"/api/v1/runs/{acme.ledger_run.id}/rollback/")

    # then no money moved back
    assert refused.status_code == 404
    assert database_state() == before
    accepted = client_for(acme_operator).post(f"/api/v1/runs/{acme.ledger_run.id}/rollback/")
    assert accepted.status_code == 202, accepted.content
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("1000")


def test_the_operator_of_another_tenant_cannot_post_an_external_result_but_acmes_operator_can(
    acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    url = f"/api/v1/calls/{acme.external_call.id}/result/"
    before = database_state()

    refused = client_for(globex_operator).post(url, {"result": {"name": "Mallory"}}, format="json")

    assert refused.status_code == 404
    assert database_state() == before
    assert ToolCall.objects.get(pk=acme.external_call.pk).status == CallStatus.AWAITING_RESULT
    accepted = client_for(acme_operator).post(url, {"result": {"name": "Ada"}}, format="json")
    assert accepted.status_code == 200, accepted.content
    assert ToolCall.objects.get(pk=acme.external_call.pk).result == {"name": "Ada"}
