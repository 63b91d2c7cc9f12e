"""API plumbing: provider exports at their own address, filter sets, stable cursors, a warning-free schema."""

import functools
import uuid
from collections.abc import Callable
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from agents_app.services import agent_create
from tests.helpers import RequestCall
from toolhub.models import Tenant, ToolCall, ToolDefinition
from toolhub.tools.export import EXPORT_FORMATS

pytestmark = pytest.mark.django_db


@pytest.fixture
def request_call(request_call: RequestCall) -> RequestCall:
    return functools.partial(request_call, tenant="acme")


@pytest.mark.parametrize("provider", EXPORT_FORMATS)
def test_each_provider_export_has_its_own_address_and_the_old_query_still_answers_deprecated(
    provider: str, alice_client: APIClient
) -> None:
    new = alice_client.get(f"/api/v1/tools/export/{provider}/")
    old = alice_client.get(f"/api/v1/tools/?format={provider}")

    assert new.status_code == 200 and old.status_code == 200
    assert new.json() == old.json() and new.json()
    assert "Deprecation" not in new.headers
    assert old.headers["Deprecation"] == "true"
    assert old.headers["Link"] == f'</api/v1/tools/export/{provider}/>; rel="successor-version"'


def test_an_unknown_provider_export_is_a_404_naming_the_known_ones(alice_client: APIClient) -> None:
    response = alice_client.get("/api/v1/tools/export/llama.cpp/")

    assert response.status_code == 404
    assert response.json() == {"detail": f"Unknown provider 'llama.cpp'; use one of {', '.join(EXPORT_FORMATS)}."}


def test_filters_narrow_only_the_callers_tenant_rows(
    operator_client: APIClient, request_call: Callable[..., ToolCall], alice: User, other_tenant: Tenant
) -> None:
    # given a held call of acme and one of globex, for the same tool
    held = request_call("risky_effect", {"note": "acme's"}, alice, uuid.uuid4())
    theirs = request_call("risky_effect", {"note": "globex's"}, None, uuid.uuid4(), tenant="globex")
    assert held.status == theirs.status == "pending_approval"

    # then acme's operator finds acme's by tool and by run, never globex's, even by its run id
    by_tool = operator_client.get("/api/v1/approvals/?tool=risky_effect&status=pending").json()["results"]
    assert [item["call"] for item in by_tool] == [str(held.id)]
    assert operator_client.get(f"/api/v1/calls/?run={theirs.run_id}").json()["results"] == []
    assert [c["id"] for c in operator_client.get(f"/api/v1/calls/?run={held.run_id}").json()["results"]] == [
        str(held.id)
    ]
    assert operator_client.get("/api/v1/approvals/?tool=no_such_tool").json()["results"] == []


def test_agents_are_filtered_by_name_and_provider_within_the_callers_tenants(
    alice_client: APIClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    mine = agent_create(name="helper", tenant="acme")
    agent_create(name="helper", tenant="globex")
    agent_create(name="other", tenant="acme")

    named = alice_client.get("/api/v1/agents/?name=helper").json()["results"]
    by_provider = alice_client.get("/api/v1/agents/?provider=scripted").json()["results"]

    assert [a["id"] for a in named] == [mine.pk]
    assert {a["name"] for a in by_provider} == {"helper", "other"}
    assert all(a["tenant"] == "acme" for a in by_provider)
    assert alice_client.get("/api/v1/agents/?provider=nobody").json()["results"] == []


def test_a_bad_filter_value_is_a_400_naming_the_filter(operator_client: APIClient) -> None:
    response = operator_client.get("/api/v1/approvals/?status=maybe")

    assert response.status_code == 400
    assert list(response.json()) == ["status"]


@pytest.mark.parametrize("value", ["maybe", "0", "1", "yes", "TRUE", ""])
def test_the_catalogue_refuses_an_enabled_filter_other_than_true_or_false(alice_client: APIClient, value: str) -> None:
    # a value the filter would ignore must not answer the whole catalogue as if it had been applied
    response = alice_client.get(f"/api/v1/tools/?enabled={value}")

    if value == "":  # an empty parameter is no filter, as for every other list
        assert response.status_code == 200
    else:
        assert response.status_code == 400
        assert list(response.json()) == ["enabled"]


def test_the_catalogue_is_filtered_by_enabled(operator_client: APIClient) -> None:
    def listed_with(query: str) -> set[str]:
        page = operator_client.get(f"/api/v1/tools/?page_size=500{query}").json()
        return {tool["name"] for tool in page["results"]}

    # given one tool an operator switched off
    switched_off = sorted(listed_with(""))[0]
    ToolDefinition.objects.filter(name=switched_off).update(enabled=False)

    # when the catalogue is asked for the enabled and the disabled tools
    enabled, disabled = listed_with("&enabled=true"), listed_with("&enabled=false")

    # then each answer holds only its kind

    assert switched_off not in enabled and enabled
    assert switched_off in disabled


def test_cursor_pages_of_rows_created_at_the_same_instant_show_each_row_once(
    operator_client: APIClient, request_call: Callable[..., ToolCall], alice: User
) -> None:
    # given seven calls that share one creation time (one transaction's rows do)
    calls = [request_call("record_effect", {"note": str(i)}, alice) for i in range(7)]
    ToolCall.objects.filter(pk__in=[c.pk for c in calls]).update(created_at=timezone.now())

    # when a client pages through them two at a time
    seen: list[str] = []
    url: str | None = "/api/v1/calls/?page_size=2"
    while url:
        page = operator_client.get(url).json()
        seen += [item["id"] for item in page["results"]]
        url = page["next"]

    # then every call appears exactly once, in the stable order (-created_at, -id)
    expected = [str(c.pk) for c in sorted(calls, key=lambda c: c.pk, reverse=True)]
    assert seen == expected


def test_the_openapi_schema_generates_without_warnings() -> None:
    out = StringIO()
    call_command("spectacular", "--fail-on-warn", "--format", "openapi-json", stdout=out)

    document = out.getvalue()
    assert '"/api/v1/tools/export/{provider}/"' in document
    assert '"name": "status"' in document and '"name": "run"' in document  # the filter sets' parameters
