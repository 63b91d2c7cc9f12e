"""Direct sagas over REST: open, list, get, roll back by saga id; steps are calls of POST /api/v1/calls/."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.testapp.models import SideEffect
from toolhub.models import Tenant, TenantMembership, ToolCall
from toolhub.sagas.models import Saga

# Committed for real: steps are recorded and compensated when their calls' transactions commit.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bob(other_tenant: Tenant) -> User:
    user = User.objects.create_user("bob", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def step(client: APIClient, label: str, saga_id: str = "trip-1") -> Any:
    return client.post(
        "/api/v1/calls/", {"tool": "saga_step", "arguments": {"label": label}, "saga_id": saga_id}, format="json"
    )


def test_a_saga_is_opened_and_seen_only_in_its_tenant(alice: User, bob: User) -> None:
    alice_client, bob_client = client_for(alice), client_for(bob)

    opened = alice_client.post("/api/v1/sagas/", {"saga_id": "trip-1"}, format="json")

    assert opened.status_code == 201, opened.content
    assert (opened.json()["key"], opened.json()["status"]) == ("trip-1", "open")
    assert Saga.objects.get(key="trip-1").tenant == "acme"
    assert alice_client.get("/api/v1/sagas/trip-1/").status_code == 200
    assert [saga["key"] for saga in alice_client.get("/api/v1/sagas/").json()["results"]] == ["trip-1"]
    assert bob_client.get("/api/v1/sagas/trip-1/").status_code == 404
    assert bob_client.get("/api/v1/sagas/").json()["results"] == []
    assert bob_client.post("/api/v1/sagas/trip-1/rollback/").status_code == 404
    # the key is taken in acme: a second saga of that name there is refused
    assert alice_client.post("/api/v1/sagas/", {"saga_id": "trip-1"}, format="json").status_code == 409


def test_two_tenants_name_their_sagas_alike_and_each_rolls_back_only_its_own(alice: User, bob: User) -> None:
    # given alice (acme) and bob (globex) each with a saga called trip-1: bob's opened by its first step
    alice_client, bob_client = client_for(alice), client_for(bob)
    assert alice_client.post("/api/v1/sagas/", {"saga_id": "trip-1"}, format="json").status_code == 201
    assert step(alice_client, "alice-flight").status_code == 200
    assert step(bob_client, "bob-flight").status_code == 200
    assert step(bob_client, "bob-hotel").status_code == 200

    # when bob rolls his back
    rolled = bob_client.post("/api/v1/sagas/trip-1/rollback/")

    # then his two steps are undone, alice's stays done and her saga stays open, each sees only their own
    assert rolled.status_code == 202, rolled.content
    assert (rolled.json()["tenant"], rolled.json()["status"]) == ("globex", "compensated")
    assert sorted(SideEffect.objects.filter(tool="undo_saga_step").values_list("note", flat=True)) == [
        "bob-flight",
        "bob-hotel",
    ]
    assert dict(Saga.objects.filter(key="trip-1").values_list("tenant", "status")) == {
        "acme": "open",
        "globex": "compensated",
    }
    mine = alice_client.get("/api/v1/sagas/trip-1/").json()
    assert (mine["tenant"], [c["status"] for c in mine["compensations"]]) == ("acme", ["recorded"])
    assert [s["tenant"] for s in bob_client.get("/api/v1/sagas/").json()["results"]] == ["globex"]
    assert set(ToolCall.objects.filter(saga_id="trip-1", user=alice).values_list("tenant", "status")) == {
        ("acme", "succeeded")
    }


def test_someone_in_two_tenants_with_two_sagas_of_one_id_is_asked_which_tenant(
    alice: User, other_tenant: Tenant
) -> None:
    # given alice in acme and globex, with a saga of hers called trip-1 in each
    TenantMembership.objects.create(user=alice, tenant=other_tenant)
    client = client_for(alice)
    for tenant in ("acme", "globex"):
        opened = client.post("/api/v1/sagas/", {"saga_id": "trip-1", "tenant": tenant}, format="json")
        assert opened.status_code == 201, opened.content

    # when she asks for trip-1 without and with a tenant
    ambiguous = client.get("/api/v1/sagas/trip-1/")
    refused = client.post("/api/v1/sagas/trip-1/rollback/")
    chosen = client.get("/api/v1/sagas/trip-1/?tenant=acme")
    elsewhere = client.get("/api/v1/sagas/trip-1/?tenant=initech")

    # then she is asked which tenant she means (nothing rolled back), and given the one she names
    assert (ambiguous.status_code, refused.status_code) == (400, 400)
    assert "add ?tenant=<slug>" in ambiguous.json()["tenant"]
    assert chosen.status_code == 200 and chosen.json()["tenant"] == "acme"
    assert elsewhere.status_code == 400  # a tenant not hers, refused as every request naming one is
    assert not Saga.objects.exclude(status="open").exists()


def test_a_saga_without_an_id_gets_one(alice: User) -> None:
    opened = client_for(alice).post("/api/v1/sagas/", {}, format="json")

    assert opened.status_code == 201
    assert len(opened.json()["key"]) == 36


def test_rollback_by_saga_id_undoes_the_completed_steps_newest_first(alice: User) -> None:
    client = client_for(alice)
    client.post("/api/v1/sagas/", {"saga_id": "trip-1"}, format="json")
    first, second = step(client, "flight"), step(client, "hotel")
    assert (first.status_code, second.status_code) == (200, 200)

    rolled = client.post("/api/v1/sagas/trip-1/rollback/")

    assert rolled.status_code == 202, rolled.content
    saga = client.get("/api/v1/sagas/trip-1/").json()
    assert saga["status"] == "compensated"
    assert [(c["step_tool"], c["status"]) for c in saga["compensations"]] == [
        ("saga_step", "succeeded"),
        ("saga_step", "succeeded"),
    ]
    assert [c["sequence"] for c in saga["compensations"]] == [2, 1]
    assert sorted(SideEffect.objects.filter(tool="undo_saga_step").values_list("note", flat=True)) == [
        "flight",
        "hotel",
    ]
    assert set(ToolCall.objects.filter(saga_id="trip-1", kind="api").values_list("status", flat=True)) == {
        "compensated"
    }


def test_rollback_of_a_saga_with_nothing_to_undo_is_409(alice: User) -> None:
    client = client_for(alice)
    client.post("/api/v1/sagas/", {"saga_id": "empty"}, format="json")

    response = client.post("/api/v1/sagas/empty/rollback/")

    assert response.status_code == 409
    assert "Nothing to roll back" in response.json()["detail"]


def test_only_its_owner_or_an_operator_rolls_a_saga_back(alice: User, viewer: User) -> None:
    client = client_for(alice)
    client.post("/api/v1/sagas/", {"saga_id": "trip-2"}, format="json")
    step(client, "flight", "trip-2")

    refused = client_for(viewer).post("/api/v1/sagas/trip-2/rollback/")

    assert refused.status_code == 403
    assert not SideEffect.objects.filter(tool="undo_saga_step").exists()
