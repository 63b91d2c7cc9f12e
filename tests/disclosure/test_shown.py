"""What a run can see is shown on its API representation and its admin page, within the tenant boundary."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

from tests.disclosure.conftest import Recorder, answer, call
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.django_db


@pytest.fixture
def searched_run(make_agent: Any, start_run: Any, alice: User, recorder: Recorder) -> Any:
    agent = make_agent(
        script=[call("tool_search", query="weather"), answer()], tools=["clock", "get_weather"], tool_search=True
    )
    return start_run(agent, alice)


def test_run_api_shows_what_the_run_can_see(searched_run: Any, alice_client: APIClient) -> None:
    response = alice_client.get(reverse("run-detail", args=[searched_run.id]))

    assert response.status_code == 200
    assert response.json()["disclosure"] == {
        "active_groups": None,
        "unfolded": {},
        "exclusive": "",
        "hits": ["get_weather"],
        "visible": ["clock", "tool_search", "get_weather"],
    }


def test_another_tenants_run_is_not_shown(searched_run: Any, other_tenant: Tenant) -> None:
    bob = User.objects.create_user("bob", password="bob-password")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    client = APIClient()
    client.force_authenticate(bob)

    response = client.get(reverse("run-detail", args=[searched_run.id]))

    assert response.status_code == 404
    assert "get_weather" not in response.content.decode()


def test_run_admin_page_shows_what_the_run_can_see(searched_run: Any, client: Any) -> None:
    admin = User.objects.create_superuser("root", "root@example.com", "root-password")
    client.force_login(admin)

    page = client.get(reverse("admin:agents_app_agentrun_change", args=[searched_run.id]))

    assert page.status_code == 200
    text = page.content.decode()
    assert "What the run can see" in text and "get_weather" in text and "hits" in text
