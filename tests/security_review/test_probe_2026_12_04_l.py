"""Adversarial probe (2026-12-04, pass l) of the REST API and the MCP endpoint.

Each test states the secure behaviour; those that fail on the current code are findings (see each docstring).
"""

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.models import RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from demo.models import Account, LedgerEntry
from tests.mcp.conftest import live_asgi, token  # noqa: F401 - fixtures
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    """acme's auditor: reads every row of acme, changes nothing."""
    return make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],))


ORDER_THEN_DEBIT = [
    {"tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-ACME", "amount": "100"}}]},
    {"content": "Done: {last_tool_result}"},
]


def test_a_direct_saga_opened_under_a_waiting_runs_id_never_takes_the_runs_steps(
    alice: User, acme_auditor: User, acme_operator: User, carol: User
) -> None:
    """Found: ``POST /api/v1/sagas/ {"saga_id": "<run id>"}`` (``saga_open``) never asks whether the id is a run's
    (the direct-call path does, ``saga_key_reserved``). acme's auditor, who reads every run id, opens a direct saga
    under alice's run's id while the run waits for approval; the run's later debit is filed into that saga
    (``locked_saga`` get_or_create) owned by the auditor, who then rolls alice's debit back (202).
    Expect: a run's id is refused as a saga id when opening a saga, and the auditor can roll nothing back.
    """
    Account.objects.create(account_id="ACC-ACME", owner="alice", tenant="acme", balance=Decimal("1000"))
    agent = agent_create(
        name="order-then-debit", provider="scripted", tools=["create_order", "debit"], script=ORDER_THEN_DEBIT
    )
    run = run_start(agent=agent, user=alice, input="order and pay")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING, run.error

    auditor = client_for(acme_auditor)
    assert auditor.get(f"/api/v1/runs/{run.id}/").status_code == 200  # the auditor reads the run id
    opened = auditor.post("/api/v1/sagas/", {"saga_id": str(run.id)}, format="json")

    approval = ApprovalRequest.objects.get(call__run_id=run.id)
    approval_approve(request_id=approval.pk, user=acme_operator, comment="ok", expected_round=approval.round)
    run.refresh_from_db()
    assert LedgerEntry.objects.filter(kind="debit").count() == 1, (run.status, run.error)

    rollback = auditor.post(f"/api/v1/sagas/{run.id}/rollback/")
    refunds = LedgerEntry.objects.filter(kind="refund").count()
    assert (rollback.status_code, refunds) not in {(202, 1)}, (opened.status_code, rollback.content)
    assert rollback.status_code in (403, 404, 409), rollback.content
    assert opened.status_code in (400, 409), opened.content
    assert refunds == 0
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("900")


DEEP = 100_000


@pytest.mark.parametrize("form", ["multipart", "urlencoded"])
@pytest.mark.parametrize("field", ["arguments", "context"])
def test_a_form_encoded_call_nested_thousands_deep_is_refused_not_a_server_error(
    alice: User, form: str, field: str
) -> None:
    """Found: the nesting guard (``JSONBodyCheckMiddleware``/``StorableJSONParser``) reads only JSON bodies; the API
    also takes form bodies (FormParser, MultiPartParser), where ``CallInputSerializer``'s JSONFields ``json.loads``
    the field's text. A call whose ``arguments`` or ``context`` is ``[[[...]]]`` 100,000 deep raises
    ``RecursionError`` out of the serializer: a 500 (a traceback in the log, a worker thread's stack spent).
    Expect: 400, nothing recorded, like the JSON body nested too deep.
    """
    from urllib.parse import urlencode

    from rest_framework.test import APIClient

    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)
    data = {"tool": "calculate", "arguments": '{"a": 1, "op": "+", "b": 2}', "context": "{}"}
    data[field] = "[" * DEEP + "]" * DEEP
    if form == "multipart":
        response = client.post("/api/v1/calls/", data, format="multipart")
    else:
        response = client.post("/api/v1/calls/", urlencode(data), content_type="application/x-www-form-urlencoded")

    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert not ToolCall.objects.exists()


def test_a_form_encoded_external_result_nested_thousands_deep_is_refused_not_a_server_error(
    alice: User, acme: Any
) -> None:
    """Found: the same gap on ``POST /api/v1/calls/{id}/result/``: a multipart ``result`` 100,000 deep makes
    ``CallResultInputSerializer``'s JSONField raise ``RecursionError``: 500.
    Expect: 400, the call still awaiting its result.
    """
    from rest_framework.test import APIClient

    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)
    response = client.post(
        f"/api/v1/calls/{acme.external_call.pk}/result/", {"result": "[" * DEEP + "]" * DEEP}, format="multipart"
    )

    assert response.status_code == 400, (response.status_code, response.content[:200])
    acme.external_call.refresh_from_db()
    assert acme.external_call.status == "awaiting_result"


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def test_a_nul_in_a_form_encoded_calls_context_is_refused_not_stored(alice: User) -> None:
    """Found: a form body's ``context`` (JSON text in a form field) skips the JSON body check; ``client_context``
    takes any string of at most 500 characters, NUL included, and the pipeline stores it in the call's context and its
    ``call.requested`` audit event (on PostgreSQL a jsonb column refuses ``\\u0000``: the request fails with a 500).
    Expect: 400 and no call, as for the same context in a JSON body.
    """
    from rest_framework.test import APIClient

    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)
    response = client.post(
        "/api/v1/calls/",
        {"tool": "calculate", "arguments": '{"a": 1, "op": "+", "b": 2}', "context": '{"correlation_id": "a\\u0000b"}'},
        format="multipart",
    )

    stored = [c for c in ToolCall.objects.values_list("context", flat=True) if _has_nul(c)]
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert stored == []


def _mcp(base: str, user: User, body: Any, **headers: str) -> Any:
    """One JSON-RPC post to /mcp (stateless, as curl sends it)."""
    import json

    import httpx

    return httpx.post(
        f"{base}/mcp",
        content=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token(user)}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
            **headers,
        },
        timeout=60,
    )


def test_a_nul_in_an_mcp_calls_meta_context_is_refused_not_stored(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
) -> None:
    """Found: ``_meta`` of a ``tools/call`` goes through ``client_context`` (strings up to 500 characters), which
    lets a NUL through: the call's context and its audit event store it (PostgreSQL's jsonb refuses it: the client
    reads the internal error "unhandled errors in a TaskGroup (1 sub-exception)"). Arguments with a NUL are
    refused with a message, ``_meta`` values are not.
    Expect: the call is refused (an error naming the key), and no call row holds the NUL.
    """
    answer = _mcp(
        live_asgi,
        alice,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "calculate",
                "arguments": {"a": 1, "op": "+", "b": 2},
                "_meta": {"correlation_id": "a\u0000b"},
            },
        },
    )

    stored = [c for c in ToolCall.objects.values_list("context", flat=True) if _has_nul(c)]
    assert stored == [], answer.text[:300]
    # a refusal naming the key, not an internal error ("unhandled errors in a TaskGroup" on PostgreSQL)
    assert "correlation_id" in answer.text and "TaskGroup" not in answer.text, answer.text[:300]


def test_an_agents_script_names_no_tool_its_reader_may_not_use(alice: User) -> None:
    """Found: ``AgentSerializer`` cuts ``tools`` and ``tool_choice`` down to the tools the reader may see
    (``CallerView.tools_seen``, the 2026-12-03 fix), but returns ``model.script`` whole: a scripted agent's turns name
    the denied tool ``debit`` and its arguments, in the agent list and detail, to alice, whose catalogue leaves
    ``debit`` out and whose call of it answers 404 like a missing tool.
    Expect: no field of the agent as alice reads it names ``debit``.
    """
    import json

    from toolhub.models import Grant, GrantEffect

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="debit", user=alice)
    script = [
        {"tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-TREASURY", "amount": "250000"}}]},
        {"content": "done"},
    ]
    agent = agent_create(name="probe-l-ledger", provider="scripted", tools=["calculate", "debit"], script=script)
    client = client_for(alice)
    assert client.post("/api/v1/calls/", {"tool": "debit", "arguments": {}}, format="json").status_code == 404

    detail = client.get(f"/api/v1/agents/{agent.pk}/").json()
    [listed] = client.get("/api/v1/agents/?name=probe-l-ledger").json()["results"]

    assert detail["tools"] == ["calculate"]
    assert "debit" not in json.dumps(detail), detail["model"]
    assert "debit" not in json.dumps(listed), listed["model"]


def test_mcp_calls_count_against_the_per_user_calls_rate(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    settings: Any,
) -> None:
    """Found: direct calls are throttled per user (``calls`` scope, ``TOOLHUB_THROTTLE_CALLS``) on
    ``POST /api/v1/calls/``, but a ``tools/call`` over MCP makes the same governed call with no throttle at all: at a
    rate of 2 a minute, alice's REST client gets 429 on the third call while her MCP client runs all three (and any
    number more).
    Expect: MCP calls count against the same per-user rate; beyond it nothing runs.
    """
    from django.core.cache import cache

    from tests.testapp.models import SideEffect

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"calls": "2/minute"}}
    cache.clear()
    try:
        answers = [
            _mcp(
                live_asgi,
                alice,
                {
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "tools/call",
                    "params": {"name": "record_effect", "arguments": {"note": f"mcp-{n}"}},
                },
            )
            for n in range(3)
        ]
    finally:
        cache.clear()

    assert all(answer.status_code in (200, 429) for answer in answers), [a.text[:200] for a in answers]
    assert SideEffect.objects.count() == 2, [a.text[:200] for a in answers]


def test_an_idempotent_call_whose_arguments_string_nests_thousands_deep_is_refused_not_a_server_error(
    alice: User,
) -> None:
    """Found: arguments may be sent as a JSON string (``"arguments": "{...}"``); the body check sees only a string,
    and ``parse_arguments`` refuses deep nesting (it catches ``RecursionError``), but with an ``Idempotency-Key`` the
    request's fingerprint (``toolhub.direct._fingerprint``) first ``json.loads`` the string catching only
    ``ValueError``: ``RecursionError`` escapes, a 500.
    Expect: 400 (or the call recorded ``invalid`` as without a key), never a server error.
    """
    import json

    from rest_framework.test import APIClient

    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)
    body = json.dumps({"tool": "calculate", "arguments": "[" * DEEP + "]" * DEEP})
    without_key = client.post("/api/v1/calls/", body, content_type="application/json")
    with_key = client.post("/api/v1/calls/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="deep-1")

    assert without_key.status_code == 400, without_key.content[:200]
    assert with_key.status_code == 400, (with_key.status_code, with_key.content[:200])
