"""POST /api/v1/calls/: governed calls from agents built anywhere (idempotency, long-poll, refusals)."""

import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services import approval_approve, approval_reject
from tests.api.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub import ToolContext, registry, tool
from toolhub.direct import CallerContextError, client_context, direct_call_request
from toolhub.models import AuditEvent, CallIdempotencyKey, Grant, Tenant, TenantMembership, ToolCall
from toolhub.sagas.models import Compensation, Saga

# Committed for real: the embedded mode runs a call when the request's transaction commits, before it answers.
pytestmark = pytest.mark.django_db(transaction=True)

Post = Callable[..., Any]


@pytest.fixture
def post(alice_client: APIClient) -> Post:
    """POST a call as alice."""

    def send(body: dict[str, Any], query: str = "", **headers: str) -> Any:
        return alice_client.post(f"/api/v1/calls/{query}", body, format="json", headers=headers)

    return send


@tool
def echo_context(ctx: ToolContext) -> dict:
    """Return the context the tool received."""
    return {"tenant": ctx.tenant, "user": ctx.user, "correlation_id": ctx.get("correlation_id")}


def test_a_low_risk_call_runs_and_answers_200_with_its_result(post: Post, alice: User) -> None:
    response = post({"tool": "record_effect", "arguments": {"note": "from outside"}})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "succeeded"
    effect = SideEffect.objects.get()
    assert body["result"] == {"effect_id": effect.pk}
    assert (body["kind"], body["tenant"], body["approval_id"], body["replayed"]) == ("api", "acme", None, False)
    call = ToolCall.objects.get()
    assert (call.kind, call.user_id, call.tenant) == ("api", alice.pk, "acme")
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    assert requested.payload["kind"] == "api"
    assert requested.payload["client"]["channel"] == "api"
    assert AuditEvent.objects.filter(call_id=call.id, event_type="call.succeeded").exists()


def test_a_high_risk_call_answers_202_with_its_approval_and_runs_nothing(post: Post) -> None:
    response = post({"tool": "risky_effect", "arguments": {"note": "wire money"}})

    assert response.status_code == 202, response.content
    body = response.json()
    approval = ApprovalRequest.objects.get()
    assert (body["status"], body["approval_id"]) == ("pending_approval", approval.pk)
    assert response["Location"] == f"/api/v1/calls/{body['id']}/"
    assert approval.call_id == body["id"] or str(approval.call_id) == body["id"]
    assert not SideEffect.objects.exists()


def test_the_same_idempotency_key_and_request_return_the_first_call(post: Post) -> None:
    first = post({"tool": "record_effect", "arguments": {"note": "once"}}, **{"Idempotency-Key": "k-1"})
    again = post({"tool": "record_effect", "arguments": {"note": "once"}}, **{"Idempotency-Key": "k-1"})
    in_body = post({"tool": "record_effect", "arguments": {"note": "once"}, "idempotency_key": "k-1"})

    assert (first.status_code, again.status_code, in_body.status_code) == (200, 200, 200)
    assert first.json()["id"] == again.json()["id"] == in_body.json()["id"]
    assert (first.json()["replayed"], again.json()["replayed"]) == (False, True)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["result"] == first.json()["result"]
    assert ToolCall.objects.count() == 1
    assert SideEffect.objects.count() == 1


def test_the_same_idempotency_key_with_other_arguments_is_409_and_runs_nothing(post: Post) -> None:
    first = post({"tool": "record_effect", "arguments": {"note": "once"}}, **{"Idempotency-Key": "k-2"})

    other = post({"tool": "record_effect", "arguments": {"note": "twice"}}, **{"Idempotency-Key": "k-2"})

    assert other.status_code == 409, other.content
    assert "another request" in other.json()["detail"]
    assert other.json()["call"] == first.json()["id"]
    assert ToolCall.objects.count() == 1
    assert SideEffect.objects.count() == 1


def test_a_replayed_pending_call_answers_202_again(post: Post) -> None:
    first = post({"tool": "risky_effect", "arguments": {"note": "n"}}, **{"Idempotency-Key": "k-3"})
    again = post({"tool": "risky_effect", "arguments": {"note": "n"}}, **{"Idempotency-Key": "k-3"})

    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json()["approval_id"] == again.json()["approval_id"]
    assert ApprovalRequest.objects.count() == 1


def test_idempotency_keys_belong_to_their_user(post: Post, bob: User) -> None:
    mine = post({"tool": "record_effect", "arguments": {"note": "a"}}, **{"Idempotency-Key": "shared"})

    theirs = client_for(bob).post(
        "/api/v1/calls/",
        {"tool": "record_effect", "arguments": {"note": "b"}},
        format="json",
        headers={"Idempotency-Key": "shared"},
    )

    assert (mine.status_code, theirs.status_code) == (200, 200)
    assert mine.json()["id"] != theirs.json()["id"]
    assert theirs.json()["tenant"] == "globex"
    assert CallIdempotencyKey.objects.count() == 2


def test_bad_arguments_answer_400_with_the_bounded_message_and_run_nothing(post: Post) -> None:
    response = post({"tool": "record_effect", "arguments": {"note": 5, "extra": "x" * 5000}})

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["status"] == "invalid"
    assert "note" in body["detail"]
    assert "x" * 200 not in body["detail"]
    assert not SideEffect.objects.exists()


@pytest.mark.parametrize("arguments", ["not json", [1, 2], "[1]"])
def test_arguments_that_are_not_an_object_are_refused(post: Post, arguments: Any) -> None:
    response = post({"tool": "record_effect", "arguments": arguments})

    assert response.status_code == 400, response.content
    assert response.json()["status"] == "invalid"
    assert not SideEffect.objects.exists()


def test_an_unknown_tool_answers_404(post: Post) -> None:
    response = post({"tool": "record_efect", "arguments": {"note": "x"}})

    assert response.status_code == 404
    assert response.json()["status"] == "invalid"
    assert "record_effect" in response.json()["detail"]


def test_a_denied_tool_answers_like_an_unknown_one(post: Post, settings: Any, tenant: Tenant) -> None:
    # given grants that give acme record_effect only
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="record_effect", tenant=tenant)

    denied = post({"tool": "risky_effect", "arguments": {"note": "x"}})
    unknown = post({"tool": "no_such_tool", "arguments": {"note": "x"}})

    assert (denied.status_code, unknown.status_code) == (404, 404)
    assert set(denied.json()) == set(unknown.json()) == {"detail", "status"}
    assert "risky_effect" not in denied.json()["detail"].replace("'risky_effect'", "", 1)
    assert "grant" not in denied.json()["detail"].lower()
    assert ToolCall.objects.get(tool_name="risky_effect").status == "denied"
    assert not SideEffect.objects.exists()


def test_a_call_refused_by_policy_answers_403(post: Post, tenant: Tenant) -> None:
    # the tenant boundary: the model may not name another tenant in an argument
    with registry.temporarily(tenant_report):
        response = post({"tool": "tenant_report", "arguments": {"tenant": "globex"}})

    assert response.status_code == 403, response.content
    assert response.json()["status"] == "denied"


@tool
def tenant_report(tenant: str) -> str:
    """Report on a tenant."""
    return f"report {tenant}"


def test_allow_listed_context_reaches_the_tool_and_the_boundary_sets_tenant_and_user(post: Post) -> None:
    with registry.temporarily(echo_context):
        response = post({"tool": "echo_context", "context": {"correlation_id": "c-42"}})

    assert response.status_code == 200, response.content
    assert response.json()["result"] == {"tenant": "acme", "user": "alice", "correlation_id": "c-42"}


@pytest.mark.parametrize(
    ("context", "word"),
    [({"tenant": "globex"}, "tenant"), ({"user_id": 1}, "user_id"), ({"favourite": "x"}, "not accepted")],
)
def test_reserved_and_unknown_context_keys_are_refused(post: Post, context: dict, word: str) -> None:
    response = post({"tool": "record_effect", "arguments": {"note": "x"}, "context": context})

    assert response.status_code == 400
    assert word in response.json()["detail"]
    assert not ToolCall.objects.exists()


def test_a_form_encoded_call_runs_like_a_json_one(alice_client: APIClient) -> None:
    # arguments and context are JSON text in form fields
    form = {"tool": "echo_context", "arguments": "{}", "context": '{"correlation_id": "c-43"}'}
    with registry.temporarily(echo_context):
        response = alice_client.post("/api/v1/calls/", form, format="multipart")

    assert response.status_code == 200, response.content
    assert response.json()["result"] == {"tenant": "acme", "user": "alice", "correlation_id": "c-43"}


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("arguments", DEEP, "The value nests lists and objects 100000 levels deep; at most 200 are accepted."),
        ("context", DEEP, "The value nests lists and objects 100000 levels deep; at most 200 are accepted."),
        ("context", '{"correlation_id": "a\\u0000b"}', "context.correlation_id contains a NUL character"),
        ("context", '{"correlation_id": "\\ud800"}', "context.correlation_id contains an invalid character"),
        ("arguments", '{"note": "a\\u0000b"}', "arguments.note contains a NUL character"),
        ("context", '{"correlation_id": ', "The value is not valid JSON (Expecting value)."),
    ],
    ids=["deep-arguments", "deep-context", "nul", "lone-surrogate", "nul-in-arguments", "not-json"],
)
def test_json_in_a_form_field_is_held_to_the_json_bodys_limits(
    alice_client: APIClient, field: str, text: str, message: str
) -> None:
    # given a form body: the JSON body check never saw its fields' JSON
    form = {"tool": "record_effect", "arguments": '{"note": "x"}', "context": "{}", field: text}

    # when it is posted, as multipart and as urlencoded
    answers = [
        alice_client.post("/api/v1/calls/", form, format="multipart"),
        alice_client.post("/api/v1/calls/", urlencode(form), content_type="application/x-www-form-urlencoded"),
    ]

    # then the field's error says why, and nothing was recorded or run
    for response in answers:
        assert response.status_code == 400, response.content[:300]
        assert message in response.json()[field][0]
    assert not ToolCall.objects.exists()
    assert not SideEffect.objects.exists()


@pytest.mark.parametrize("value", ["a\x00b", "\ud800", float("nan")], ids=["nul", "lone-surrogate", "nan"])
def test_a_context_value_no_column_stores_is_refused_whatever_carried_it(alice: User, value: Any) -> None:
    # client_context is the intake of the REST API's context and of MCP's _meta alike
    with pytest.raises(CallerContextError, match="The context cannot be stored: correlation_id "):
        direct_call_request(
            user=alice, tool_name="record_effect", arguments={"note": "x"}, context={"correlation_id": value}
        )
    with pytest.raises(CallerContextError, match="correlation_id"):
        client_context({"correlation_id": value, "progressToken": 1}, strict=False)

    assert not ToolCall.objects.exists()


def test_an_idempotent_call_with_arguments_as_text_is_replayed_and_refused_text_is_recorded_once(post: Post) -> None:
    # the fingerprint parses the text as the intake does: the same request replays, deep text is an invalid call
    first = post({"tool": "record_effect", "arguments": '{"note": "once"}'}, **{"Idempotency-Key": "k-text"})
    again = post({"tool": "record_effect", "arguments": '{ "note" : "once" }'}, **{"Idempotency-Key": "k-text"})
    text = "[" * 20_000 + "]" * 20_000  # within the size limit, far beyond json.loads's recursion limit
    deep = [post({"tool": "record_effect", "arguments": text}, **{"Idempotency-Key": "k-deep"}) for _ in range(2)]

    assert (first.status_code, again.status_code) == (200, 200), again.content
    assert again.json()["replayed"] is True and again.json()["id"] == first.json()["id"]
    assert [response.status_code for response in deep] == [400, 400]
    assert "nested deeper than 100 levels" in deep[0].json()["detail"]
    assert deep[1].json()["replayed"] is True
    assert SideEffect.objects.count() == 1
    assert ToolCall.objects.count() == 2


def test_a_member_of_several_tenants_names_one(alice: User, other_tenant: Tenant, alice_client: APIClient) -> None:
    TenantMembership.objects.create(user=alice, tenant=other_tenant)

    unnamed = alice_client.post("/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "x"}}, format="json")
    named = alice_client.post(
        "/api/v1/calls/",
        {"tool": "record_effect", "arguments": {"note": "x"}, "tenant": "globex"},
        format="json",
    )

    assert unnamed.status_code == 400 and "several tenants" in unnamed.json()["detail"]
    assert named.status_code == 200 and named.json()["tenant"] == "globex"


def test_a_saga_id_another_tenant_uses_names_a_saga_of_ones_own(post: Post, bob: User) -> None:
    theirs = client_for(bob).post(
        "/api/v1/calls/",
        {"tool": "saga_step", "arguments": {"label": "a"}, "saga_id": "order-7"},
        format="json",
    )

    mine = post({"tool": "saga_step", "arguments": {"label": "b"}, "saga_id": "order-7"})

    assert (theirs.status_code, mine.status_code) == (200, 200)
    assert dict(Saga.objects.filter(key="order-7").values_list("tenant", "created_by__username")) == {
        "globex": "bob",
        "acme": "alice",
    }
    steps = Compensation.objects.select_related("step_call", "saga")
    assert sorted((c.saga.tenant, c.step_call.tenant, c.step_call.arguments["label"]) for c in steps) == [
        ("acme", "acme", "b"),
        ("globex", "globex", "a"),
    ]


@pytest.mark.parametrize("wait", ["soon", "-1", "nan"])
def test_a_bad_wait_is_refused(post: Post, wait: str) -> None:
    response = post({"tool": "record_effect", "arguments": {"note": "x"}}, f"?wait={wait}")

    assert response.status_code == 400
    assert not ToolCall.objects.exists()


def test_unauthenticated_calls_are_refused(api_client: APIClient) -> None:
    response = api_client.post("/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "x"}}, format="json")

    assert response.status_code in (401, 403)
    assert not ToolCall.objects.exists()


def test_a_wait_on_a_call_that_cannot_change_answers_at_once(post: Post) -> None:
    started = time.monotonic()
    response = post({"tool": "record_effect", "arguments": {"note": "x"}}, "?wait=20")

    assert response.status_code == 200
    assert time.monotonic() - started < 5


# --- long-polling and concurrent submits: other threads commit while the request waits -----------------


def _in_thread(fn: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _decide_when_pending(decide: Callable[[int], Any]) -> Callable[[], None]:
    def wait_then_decide() -> None:
        for _ in range(200):
            approval = ApprovalRequest.objects.first()
            if approval is not None:
                time.sleep(0.3)
                decide(approval.pk)
                return
            time.sleep(0.05)

    return wait_then_decide


@pytest.mark.postgres
def test_wait_returns_the_result_once_an_operator_approves(alice_client: APIClient, operator: User) -> None:
    thread = _in_thread(_decide_when_pending(lambda pk: approval_approve(request_id=pk, user=operator)))

    response = alice_client.post(
        "/api/v1/calls/?wait=15", {"tool": "risky_effect", "arguments": {"note": "go"}}, format="json"
    )
    thread.join(10)

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded"
    assert response.json()["result"] == {"effect_id": SideEffect.objects.get().pk}


@pytest.mark.postgres
def test_wait_answers_403_when_an_operator_rejects(alice_client: APIClient, operator: User) -> None:
    thread = _in_thread(_decide_when_pending(lambda pk: approval_reject(request_id=pk, user=operator, comment="no")))

    response = alice_client.post(
        "/api/v1/calls/?wait=15", {"tool": "risky_effect", "arguments": {"note": "go"}}, format="json"
    )
    thread.join(10)

    assert response.status_code == 403, response.content
    assert response.json()["status"] == "rejected"
    assert not SideEffect.objects.exists()


@pytest.mark.postgres
def test_get_with_wait_follows_a_pending_call_and_gives_up_after_the_wait(
    alice_client: APIClient, operator: User
) -> None:
    made = alice_client.post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "go"}}, format="json")
    url = f"/api/v1/calls/{made.json()['id']}/"

    started = time.monotonic()
    still = alice_client.get(f"{url}?wait=0.5")
    waited = time.monotonic() - started
    thread = _in_thread(_decide_when_pending(lambda pk: approval_approve(request_id=pk, user=operator)))
    done = alice_client.get(f"{url}?wait=15")
    thread.join(10)

    assert still.json()["status"] == "pending_approval" and 0.4 < waited < 5
    assert still.json()["approval_id"] == ApprovalRequest.objects.get().pk
    assert done.json()["status"] == "succeeded"


@pytest.mark.postgres
def test_a_concurrent_double_submit_of_one_key_makes_one_call(alice: User) -> None:
    answers: list[Any] = []
    barrier = threading.Barrier(2)

    def submit() -> None:
        client = client_for(alice)
        barrier.wait()
        answers.append(
            client.post(
                "/api/v1/calls/",
                {"tool": "slow_effect", "arguments": {"seconds": 0.3}},
                format="json",
                headers={"Idempotency-Key": "double"},
            )
        )

    threads = [_in_thread(submit) for _ in range(2)]
    for thread in threads:
        thread.join(20)

    # the first answers with the result; the second with the same call, finished or still running
    first, second = sorted(answers, key=lambda answer: answer.json()["replayed"])
    assert (first.status_code, first.json()["replayed"]) == (200, False)
    assert (second.status_code in (200, 202), second.json()["replayed"]) == (True, True)
    assert first.json()["id"] == second.json()["id"]
    assert ToolCall.objects.count() == 1
    assert SideEffect.objects.count() == 1


def test_direct_calls_are_throttled_per_user(post: Post, settings: Any) -> None:
    from django.core.cache import cache

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"calls": "2/minute"}}
    cache.clear()
    try:
        answers = [post({"tool": "record_effect", "arguments": {"note": str(n)}}).status_code for n in range(3)]
    finally:
        cache.clear()

    assert answers == [200, 200, 429]
    assert SideEffect.objects.count() == 2
