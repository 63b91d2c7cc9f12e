"""The published OpenAPI document (/api/schema/) against what the API answers, checked by tools nobody here wrote.

``openapi-spec-validator`` validates the document; ``schemathesis`` sends requests built from it to the
Django app (through WSGI, in the test's transaction) with a plain member's real token and checks every
answer: a documented status, a documented content type, a body matching the documented schema.
Deterministic and bounded: fixed cases for the known shapes, a derandomized sweep of a few examples
per operation.

Checked and found holding (2026-12-05, review n): the document validates as OpenAPI 3.0.3 and
``spectacular --validate --fail-on-warn`` is silent; every documented enum (risk, call, approval, run,
saga, compensation statuses, call kinds, decisions, rollback triggers, stop reasons) is its model's
choices; the list filters (``?enabled=``, ``?status=``, ``?run=``, ``?tool=``, ``?group=``,
``?tenant=``, ``?agent=``, ``?name=``, ``?provider=``), ``cursor``/``page_size``, ``?wait=`` and
``Idempotency-Key`` are documented; the bodies of runs, calls (with audit events), agents of a tenant,
approvals of a run's call, sagas, rollbacks and the catalogue match their schemas; no operation
answered a 500 in the sweep.
"""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate
from rest_framework.test import APIClient
from schemathesis import GenerationMode

from agents_app.models import Agent, AgentRun, RunStatus, StopReason
from agents_app.services import agent_create, run_start_by_reference
from approvals.models import ApprovalStatus, DecisionKind
from toolhub.api.keys import api_key_issue
from toolhub.models import CallKind, CallStatus, RiskLevel, Tenant, TenantMembership
from toolhub.sagas.models import CompensationStatus, RollbackTrigger, SagaStatus

pytestmark = pytest.mark.django_db

STRICT_CHECKS = ["not_a_server_error", "status_code_conformance", "content_type_conformance"]
CHECKS = [*STRICT_CHECKS, "response_schema_conformance"]


def _check_functions(names: list[str]) -> list[Any]:
    import schemathesis.checks as checks

    return [getattr(checks, name) for name in names]


@pytest.fixture
def wsgi_app() -> Iterator[WSGIHandler]:
    """Django's WSGI application, its requests kept in the test's transaction (as Django's test client keeps them)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield WSGIHandler()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def document(db: None) -> dict[str, Any]:
    response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.fixture
def api_schema(document: dict[str, Any], wsgi_app: WSGIHandler) -> Any:
    schema = schemathesis.openapi.from_dict(document)
    schema.app = wsgi_app
    return schema


@pytest.fixture
def member_token(alice: User) -> str:
    """A real token of alice, a plain member of tenant acme (no role, no staff)."""
    return api_key_issue(alice)


@pytest.fixture
def operator_token(operator: User) -> str:
    return api_key_issue(operator)


@pytest.fixture
def call_api(api_schema: Any) -> Callable[..., Any]:
    """Call one documented operation with a token and check the answer against the document; return it."""

    def call(token: str, method: str, path: str, *, checks: list[str] = CHECKS, **parts: Any) -> Any:
        operation = api_schema[path][method]
        if "body" in parts:
            parts.setdefault("media_type", "application/json")
        headers = {"Authorization": f"Token {token}", **parts.pop("headers", {})}
        case = operation.Case(headers=headers, **parts)
        return case.call_and_validate(checks=_check_functions(checks))

    return call


# --- the document itself -------------------------------------------------------------------------------------


def test_the_document_is_valid_openapi(document: dict[str, Any]) -> None:
    validate(document)
    assert document["openapi"].startswith("3.0")


def _enum(document: dict[str, Any], name: str) -> list[str]:
    return [value for value in document["components"]["schemas"][name]["enum"] if value != ""]


def test_every_documented_enum_is_its_models_choices(document: dict[str, Any]) -> None:
    expected = {
        "RiskLevelEnum": RiskLevel.values,
        "CallStatusEnum": CallStatus.values,
        "ApprovalStatusEnum": ApprovalStatus.values,
        "RunStatusEnum": RunStatus.values,
        "SagaStatusEnum": SagaStatus.values,
        "CompensationStatusEnum": CompensationStatus.values,
        "KindEnum": CallKind.values,
        "DecisionEnum": DecisionKind.values,
        "TriggerEnum": RollbackTrigger.values,
        "StopReasonEnum": [value for value in StopReason.values if value],
    }
    assert {name: _enum(document, name) for name in expected} == expected


# --- bodies the document must describe ------------------------------------------------------------------------


def test_a_global_agent_reads_as_documented(call_api: Callable[..., Any], member_token: str) -> None:
    """A member lists the global agents beside their tenant's: a global agent's ``tenant`` is null.

    Found: ``AgentSerializer.tenant`` (agents_app/serializers.py) is documented as a string, not nullable,
    though its own help text says "null: a global agent"; a generated client fails to parse the agent list.
    Expect: the answer matches the document (``tenant`` nullable).
    """
    agent = agent_create(name="global-helper", provider="scripted", script=[{"content": "hi"}], tenant=None)

    listed = call_api(member_token, "GET", "/api/v1/agents/")
    one = call_api(member_token, "GET", "/api/v1/agents/{id}/", path_parameters={"id": agent.pk})

    assert one.json()["tenant"] is None
    assert any(row["tenant"] is None for row in listed.json()["results"])


def test_the_approval_of_a_direct_call_reads_as_documented(call_api: Callable[..., Any], member_token: str) -> None:
    """A member's direct call (POST /calls/) held for approval: its approval request belongs to no run.

    Found: ``ApprovalRequestSerializer.run`` (approvals/api.py) is documented as a required uuid, not
    nullable; a direct call's request answers ``"run": null`` in GET /approvals/ and /approvals/{id}/.
    Expect: both answers match the document.
    """
    made = call_api(
        member_token,
        "POST",
        "/api/v1/calls/",
        body={"tool": "create_order", "arguments": {"product": "Desk", "amount": "5000"}},
    )
    assert made.status_code == 202

    listed = call_api(member_token, "GET", "/api/v1/approvals/")
    approval_id = made.json()["approval_id"]
    one = call_api(member_token, "GET", "/api/v1/approvals/{id}/", path_parameters={"id": approval_id})

    assert one.json()["run"] is None
    assert [row["id"] for row in listed.json()["results"]] == [approval_id]


def test_a_run_of_a_deleted_user_reads_as_documented(
    call_api: Callable[..., Any], operator_token: str, tenant: Tenant, order_agent: Agent
) -> None:
    """An operator lists their tenant's runs, one of them started by a user deleted since (``user`` null).

    Found: ``RunSummarySerializer.user`` (agents_app/serializers.py, ``default=None``) is documented as a
    string, not nullable. Expect: the run list matches the document.
    """
    gone = User.objects.create_user("gone", "gone@example.com", "gone-password")
    TenantMembership.objects.create(user=gone, tenant=tenant)
    run_start_by_reference(user=gone, agent_id=order_agent.pk, agent_name=None, input="order", context={})
    gone.delete()

    listed = call_api(operator_token, "GET", "/api/v1/runs/")

    assert [row["user"] for row in listed.json()["results"]] == [None]
    assert AgentRun.objects.filter(user=None).count() == 1


def _documented_properties(document: dict[str, Any], component: str) -> set[str]:
    return set(document["components"]["schemas"][component]["properties"])


def _response_component(document: dict[str, Any], path: str, method: str, status: str) -> str:
    schema = document["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    return str(schema["$ref"]).rsplit("/", 1)[-1]


def test_a_calls_answers_carry_only_documented_fields(
    call_api: Callable[..., Any], member_token: str, document: dict[str, Any]
) -> None:
    """A member makes a direct call and reads it: every field of each answer is in the document.

    Found: POST /api/v1/calls/ (toolhub/api/governed.py ``_answer``) adds ``approval_id`` and ``replayed``
    (and ``detail`` to a refusal), GET /api/v1/calls/{id}/ adds ``approval_id``, none of them documented
    (the 200/202 schema is ``ToolCall``/``ToolCallDetail``): a generated client drops the approval id it
    needs to follow the call. Expect: every field answered is a documented property.
    """
    made = call_api(
        member_token,
        "POST",
        "/api/v1/calls/",
        body={"tool": "create_order", "arguments": {"product": "Desk", "amount": "5000"}},
    )
    read = call_api(member_token, "GET", "/api/v1/calls/{id}/", path_parameters={"id": made.json()["id"]})

    made_fields = _documented_properties(document, _response_component(document, "/api/v1/calls/", "post", "202"))
    read_fields = _documented_properties(document, _response_component(document, "/api/v1/calls/{id}/", "get", "200"))
    assert set(made.json()) - made_fields == set()
    assert set(read.json()) - read_fields == set()


# --- refusals: documented statuses and an error shape ------------------------------------------------------------

ORDER = {"tool": "create_order", "arguments": {"product": "Desk", "amount": "5000"}}


def test_refusals_answer_documented_statuses_and_shapes(call_api: Callable[..., Any], member_token: str) -> None:
    """A member's ordinary mistakes and refusals, each answered with a status and body the document describes.

    Found: no operation documents any error status (only 200/201/202), so every 400, 403, 404, 409 and 410
    the views answer (DRF's validation errors, ``toolhub_exception_handler``, ``governed._answer``) is an
    undocumented status with an undocumented body; schemathesis reports 39 operations-statuses. A client
    generated from the document treats each as an unexpected failure with no shape to read.
    Expect: each answer's status is documented for its operation and its body matches the documented shape.
    """
    answers = {
        "unknown agent": call_api(member_token, "GET", "/api/v1/agents/{id}/", path_parameters={"id": 987654}),
        "bad status filter": call_api(member_token, "GET", "/api/v1/calls/", query={"status": "bogus"}),
        "bad cursor": call_api(member_token, "GET", "/api/v1/runs/", query={"cursor": "not-a-cursor"}),
        "run without input": call_api(member_token, "POST", "/api/v1/runs/", body={"agent": "order-demo"}),
        "creating an agent": call_api(
            member_token, "POST", "/api/v1/agents/", body={"name": "mine", "model": {"provider": "scripted"}}
        ),
        "invalid arguments": call_api(
            member_token, "POST", "/api/v1/calls/", body={"tool": "calculate", "arguments": {"a": "x"}}
        ),
        "unknown tool": call_api(member_token, "POST", "/api/v1/calls/", body={"tool": "no_such_tool"}),
    }
    held = call_api(member_token, "POST", "/api/v1/calls/", body=ORDER, headers={"Idempotency-Key": "k-1"})
    cancel = {"path_parameters": {"id": held.json()["id"]}, "body": {"reason": "changed my mind"}}
    assert call_api(member_token, "POST", "/api/v1/calls/{id}/cancel/", **cancel).status_code == 200
    answers["cancelling twice"] = call_api(member_token, "POST", "/api/v1/calls/{id}/cancel/", **cancel)
    answers["a cancelled call replayed"] = call_api(
        member_token, "POST", "/api/v1/calls/", body={**ORDER, "idempotency_key": "k-1"}
    )
    answers["a key reused"] = call_api(
        member_token, "POST", "/api/v1/calls/", body={"tool": "calculate", "idempotency_key": "k-1"}
    )

    assert {name: answer.status_code for name, answer in answers.items()} == {
        "unknown agent": 404,
        "bad status filter": 400,
        "bad cursor": 404,
        "run without input": 400,
        "creating an agent": 403,
        "invalid arguments": 400,
        "unknown tool": 404,
        "cancelling twice": 409,
        "a cancelled call replayed": 410,
        "a key reused": 409,
    }


# --- requests: what the document admits, the API takes ------------------------------------------------------------


def _admits(document: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    from openapi_schema_validator import OAS30Validator

    return OAS30Validator({**schema, "components": document["components"]}).is_valid(value)


def _body_schema(document: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    return dict(document["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"])


def _query_schema(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    parameters = document["paths"][path][method]["parameters"]
    return dict(next(p["schema"] for p in parameters if p["in"] == "query" and p["name"] == name))


def test_requests_the_document_admits_are_not_refused_as_malformed(
    call_api: Callable[..., Any], member_token: str, document: dict[str, Any], order_agent: Agent
) -> None:
    """A member sends values the document allows, and the API refuses each as malformed (400, nothing done).

    Found: ``?wait=`` (toolhub/api/governed.py ``_wait_seconds``) refuses a negative number, documented as
    any number; ``input`` of POST /runs/ and ``tool`` of POST /calls/ refuse "" (DRF's ``allow_blank=False``,
    which drf-spectacular leaves out); ``arguments`` and ``context`` of POST /calls/ refuse null and context
    anything but an object, documented as any JSON (schemathesis: "Schema-valid request rejected").
    Expect: what the API refuses as malformed, the document does not admit.
    """
    held = call_api(member_token, "POST", "/api/v1/calls/", body=ORDER)
    refused = {
        "negative wait": (
            call_api(
                member_token,
                "GET",
                "/api/v1/calls/{id}/",
                path_parameters={"id": held.json()["id"]},
                query={"wait": -1},
            ),
            _query_schema(document, "/api/v1/calls/{id}/", "get", "wait"),
            -1,
        ),
        "blank input": (
            call_api(member_token, "POST", "/api/v1/runs/", body=(run := {"agent": order_agent.name, "input": ""})),
            _body_schema(document, "/api/v1/runs/", "post"),
            run,
        ),
        "blank tool": (
            call_api(member_token, "POST", "/api/v1/calls/", body=(blank := {"tool": ""})),
            _body_schema(document, "/api/v1/calls/", "post"),
            blank,
        ),
        "null arguments": (
            call_api(member_token, "POST", "/api/v1/calls/", body=(null := {"tool": "calculate", "arguments": None})),
            _body_schema(document, "/api/v1/calls/", "post"),
            null,
        ),
        "text context": (
            call_api(member_token, "POST", "/api/v1/calls/", body=(text := {"tool": "calculate", "context": "x"})),
            _body_schema(document, "/api/v1/calls/", "post"),
            text,
        ),
    }

    assert {name: answer.status_code for name, (answer, _, _) in refused.items()} == dict.fromkeys(refused, 400)
    admitted = [name for name, (_, schema, value) in refused.items() if _admits(document, schema, value)]
    assert admitted == []


def test_arguments_as_json_text_stay_documented(call_api: Callable[..., Any], member_token: str) -> None:
    """``arguments`` may be the object's JSON text (as the help text says): a member's call with it runs."""
    made = call_api(
        member_token, "POST", "/api/v1/calls/", body={"tool": "calculate", "arguments": '{"a": 1, "op": "+", "b": 2}'}
    )
    assert made.status_code in (200, 202)


def test_the_deprecated_catalogue_exports_read_as_documented(call_api: Callable[..., Any], member_token: str) -> None:
    """A member asks the catalogue for each ``?format=<provider>`` the document lists (deprecated, still served).

    Found: GET /api/v1/tools/ (toolhub/api/views.py ``ToolListView``) documents only the paginated list for
    its 200, yet answers every listed provider format with that provider's export (a list, or MCP's
    ``{"tools": [...]}``); the export endpoint documents its body as anything. Expect: each answer matches.
    """
    formats = ["openai", "openai-strict", "anthropic", "gemini", "compact", "mcp"]
    for name in formats:
        exported = call_api(member_token, "GET", "/api/v1/tools/export/{provider}/", path_parameters={"provider": name})
        listed = call_api(member_token, "GET", "/api/v1/tools/", query={"format": name})
        assert listed.json() == exported.json()
    assert call_api(member_token, "GET", "/api/v1/tools/", query={"format": "json"}).json()["results"]


# --- a bounded sweep of every operation -----------------------------------------------------------------------------


def _sweep(operation: Any, token: str) -> None:
    """Three schema-valid requests to ``operation`` (the same three every run), each answer checked."""

    @settings(max_examples=3, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(GenerationMode.POSITIVE))
    def send(case: Any) -> None:
        case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=_check_functions(CHECKS))

    send()


def test_every_operation_answers_as_documented(api_schema: Any, member_token: str, order_agent: Agent) -> None:
    """A member's schema-valid requests to every operation: no 500, documented statuses, content types and bodies.

    Valid requests only: a tool's own arguments are not in the document, so a valid body may still be refused.
    """
    failures = {}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    for operation in operations:
        try:
            _sweep(operation, member_token)
        except BaseException as failure:  # noqa: B036 - schemathesis reports a group of failures
            failures[operation.label] = str(failure)[:2000]
    assert len(operations) == 27
    assert failures == {}


@pytest.mark.postgres
def test_a_saga_looked_up_by_text_no_column_holds_is_refused_as_documented(
    call_api: Callable[..., Any], member_token: str
) -> None:
    """A member looks a saga up with a NUL in ``?tenant=`` or in the saga id (schemathesis found it: a 500).

    Found: ``toolhub.sagas.api.visible_saga`` filtered sagas by the raw ``?tenant=`` and path id, and PostgreSQL
    refuses text holding NUL (``DataError``): GET /api/v1/sagas/{saga_id}/ and its rollback answered 500.
    Expect: the documented 400 in the documented error shape, from ``toolhub.middleware`` before any view.
    """
    opened = call_api(member_token, "POST", "/api/v1/sagas/", body={})
    key = opened.json()["key"]
    answers = [
        call_api(
            member_token, "GET", "/api/v1/sagas/{saga_id}/", path_parameters={"saga_id": key}, query={"tenant": "a\x00"}
        ),
        call_api(member_token, "GET", "/api/v1/sagas/{saga_id}/", path_parameters={"saga_id": "a\x00b"}),
        call_api(
            member_token,
            "POST",
            "/api/v1/sagas/{saga_id}/rollback/",
            path_parameters={"saga_id": key},
            query={"tenant": "\x00"},
        ),
    ]
    assert [answer.status_code for answer in answers] == [400, 400, 400]
    assert all("NUL character" in answer.json()["detail"] for answer in answers)
