"""Every GET route of the REST API, swept by construction: nothing of acme reaches globex's people or the tenantless.

The routes come from the URL configuration (``api_get_routes``), not from a list: each route's resource (its first
segment under ``/api/v1/``) and each path parameter must be known here, or the sweep fails naming it. globex's
auditor, operator, developer and plain member, and a staff user with no tenant, read every list (plain, filtered
by acme's tenant, run and status, searched, ordered) and find none of acme's ids or names; and every detail of an
acme row answers exactly as the same route for a missing row.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from agents_app.models import Agent
from agents_app.services import agent_create
from tests.posture.test_api_query_counts import api_get_routes
from tests.tenancy.conftest import AcmeData, database_state, make_user, random_uuid

pytestmark = pytest.mark.django_db(transaction=True)

PEOPLE = ("globex_auditor", "globex_operator", "globex_developer", "globex_user", "tenantless_staff")
MISSING_INT = "987654321"
#: Query strings every list is read with: acme's tenant, run and status asked for by hand, searches, orderings.
LIST_QUERIES = (
    "",
    "?page_size=500",
    "?tenant=acme",
    "?status=pending",
    "?status=waiting",
    "?search=acme",
    "?q=alice",
    "?ordering=-created_at",
    "?ordering=tenant",
    "?ordering=user__username",
)


@pytest.fixture
def tenantless_staff(roles: dict[str, Group]) -> User:
    return make_user("nobody-staff", staff=True, groups=tuple(roles.values()))


@pytest.fixture
def acme_agent(acme: AcmeData) -> Agent:
    return agent_create(name="acme-private-agent", tenant="acme", script=[{"content": "hi"}], tools=["calculate"])


def _parameters(acme: AcmeData, agent: Agent) -> dict[str, dict[str, tuple[str, str]]]:
    """For each resource, each path parameter: (acme's value, a missing value)."""
    return {
        "calls": {
            "pk": (str(acme.artifact_call.id), random_uuid()),
            "artifact_id": (str(acme.artifact.pk), MISSING_INT),
        },
        "runs": {"pk": (str(acme.ledger_run.id), random_uuid())},
        "approvals": {"pk": (str(acme.approval.pk), MISSING_INT)},
        "sagas": {"saga_id": (acme.saga.key, random_uuid())},
        "agents": {"pk": (str(agent.pk), MISSING_INT)},
        "tools": {"provider": ("openai", "openai")},  # the catalogue: no row of a tenant in the path
    }


def _markers(acme: AcmeData, agent: Agent) -> list[str]:
    return [
        str(acme.ledger_run.id),
        str(acme.waiting_run.id),
        str(acme.external_run.id),
        str(acme.artifact_call.id),
        str(acme.external_call.id),
        acme.saga.key,
        agent.name,
    ]


def _fill(route: str, values: dict[str, tuple[str, str]], which: int) -> str:
    path = "/" + route
    for segment in route.split("/"):
        if segment.startswith("<"):
            name = segment.strip("<>").split(":")[-1]
            assert name in values, f"{route}: tell the sweep which row of acme fills <{name}> (in _parameters)"
            path = path.replace(segment, values[name][which])
    return path


def _body(response: Any) -> Any:
    return response.json() if response.get("Content-Type", "").startswith("application/json") else response.content


@pytest.mark.parametrize("who", PEOPLE)
def test_no_api_route_shows_a_row_of_another_tenant(
    who: str, acme: AcmeData, acme_agent: Agent, request: pytest.FixtureRequest
) -> None:
    client = APIClient()
    client.force_authenticate(request.getfixturevalue(who))
    parameters, markers = _parameters(acme, acme_agent), _markers(acme, acme_agent)
    routes = api_get_routes()
    listed = 0
    assert {"call-list", "run-list", "approval-list", "saga-list", "agent-list"} <= set(routes)
    for name, route in routes.items():
        resource = route.split("/")[2]
        assert resource in parameters, f"{name}: add the resource {resource!r} of {route} to _parameters"
        if "<" not in route:
            for query in LIST_QUERIES:
                response = client.get(f"/{route}{query}")
                assert response.status_code in (200, 400, 403), (name, query, response.status_code)
                listed += response.status_code == 200
                text = response.content.decode()
                assert not [m for m in markers if m in text], (name, query, [m for m in markers if m in text])
            continue
        foreign = client.get(_fill(route, parameters[resource], 0))
        missing = client.get(_fill(route, parameters[resource], 1))
        assert foreign.status_code == missing.status_code, (name, foreign.status_code, missing.status_code)
        if resource != "tools":
            assert foreign.status_code in (403, 404), (name, foreign.status_code)
            assert _body(foreign) == _body(missing), name
        text = foreign.content.decode()
        assert not [m for m in markers if m in text], name
    assert listed >= 5 * len(LIST_QUERIES) // 2  # the lists did answer: the sweep read them


def api_post_routes() -> dict[str, str]:
    """Every named route under ``/api/v1/`` whose view answers POST (results, cancels, retries, decisions)."""
    routes: dict[str, str] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern) and (prefix + str(entry.pattern)).startswith("api/v1/"):
                view = getattr(entry.callback, "view_class", None) or getattr(entry.callback, "cls", None)
                actions = getattr(entry.callback, "actions", None) or {}
                if "post" in actions or (not actions and hasattr(view, "post")):
                    routes[str(entry.name)] = prefix + str(entry.pattern)

    walk(get_resolver().url_patterns, "")
    return routes


@pytest.mark.parametrize("who", PEOPLE)
def test_no_api_route_acts_on_a_row_of_another_tenant(
    who: str, acme: AcmeData, acme_agent: Agent, request: pytest.FixtureRequest
) -> None:
    client = APIClient()
    client.force_authenticate(request.getfixturevalue(who))
    parameters, markers = _parameters(acme, acme_agent), _markers(acme, acme_agent)
    routes = {name: route for name, route in api_post_routes().items() if "<" in route}
    assert {"call-result", "run-cancel", "approval-approve", "saga-rollback"} <= set(routes)
    body = {"result": {"name": "Mallory"}, "comment": "x", "reason": "x"}
    before = database_state()
    for name, route in routes.items():
        resource = route.split("/")[2]
        assert resource in parameters, f"{name}: add the resource {resource!r} of {route} to _parameters"
        foreign = client.post(_fill(route, parameters[resource], 0), body, format="json")
        missing = client.post(_fill(route, parameters[resource], 1), body, format="json")
        assert foreign.status_code == missing.status_code, (name, foreign.status_code, missing.status_code)
        assert foreign.status_code in (403, 404), (name, foreign.status_code)
        assert _body(foreign) == _body(missing), name
        assert not [m for m in markers if m in foreign.content.decode()], name
    assert database_state() == before
