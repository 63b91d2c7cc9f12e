"""External (schema-only) tools, return behaviour and one-shot-per-loop, through runs and the API."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import RunStatus
from tests.helpers import RequestCall, event_types
from tests.testapp.models import SideEffect
from tests.tools.conftest import StartRun
from toolhub import ReturnBehavior, Tool, ToolContext, registry, tool
from toolhub.models import CallStatus, ToolCall

LOOKUP = Tool.external(
    "crm_lookup",
    "Look a customer up in the CRM (answered by the CRM connector).",
    {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
)

EXTERNAL_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "crm_lookup", "arguments": {"email": "a@example.com"}}]},
    {"content": "CRM says: {last_tool_result}"},
]


def test_external_call_suspends_the_run_until_its_result_is_posted(
    start_run: StartRun, alice: User, alice_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    # given a run whose model calls an external tool
    with registry.temporarily(LOOKUP):
        run = start_run(alice, tools=["crm_lookup"], script=EXTERNAL_SCRIPT)
        call = ToolCall.objects.get(run_id=run.id)

        # then the run waits, nothing ran, and the call awaits its result
        assert run.status == RunStatus.WAITING
        assert call.status == CallStatus.AWAITING_RESULT
        assert event_types(call) == ["call.requested", "call.awaiting_result"]

        # when the connector posts the result
        with django_capture_on_commit_callbacks(execute=True):
            response = alice_client.post(
                f"/api/v1/calls/{call.id}/result/", {"result": {"name": "Ada", "tier": "gold"}}, format="json"
            )

    # then the call succeeded, was audited, and the run resumed and completed
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded"
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.result == {"name": "Ada", "tier": "gold"}
    assert event_types(call) == ["call.requested", "call.awaiting_result", "call.succeeded"]
    from toolhub.models import AuditEvent

    audited = AuditEvent.objects.get(call_id=call.id, event_type="call.succeeded")
    assert audited.actor == "external:alice" and audited.payload["source"] == "external"
    assert run.status == RunStatus.COMPLETED
    assert run.output == 'CRM says: {"name": "Ada", "tier": "gold"}'
    # a second submission is refused and changes nothing
    again = alice_client.post(f"/api/v1/calls/{call.id}/result/", {"error": "late"}, format="json")
    assert again.status_code == 409
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED


def test_external_error_reaches_the_model(request_call: RequestCall, alice: User, alice_client: APIClient) -> None:
    with registry.temporarily(LOOKUP):
        call = request_call("crm_lookup", {"email": "b@example.com"}, user=alice)
        response = alice_client.post(f"/api/v1/calls/{call.id}/result/", {"error": "CRM is down."}, format="json")

    assert response.status_code == 200
    call.refresh_from_db()
    assert (call.status, call.model_text()) == (CallStatus.FAILED, "CRM is down.")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "The value nests lists and objects 100000 levels deep; at most 200"),
        ('{"name": "a\\u0000b"}', "The value cannot be stored: result.name contains a NUL character"),
    ],
    ids=["thousands-deep", "nul"],
)
def test_a_form_encoded_result_is_held_to_the_json_bodys_limits(
    request_call: RequestCall, alice: User, alice_client: APIClient, text: str, message: str
) -> None:
    with registry.temporarily(LOOKUP):
        call = request_call("crm_lookup", {"email": "d@example.com"}, user=alice)
        response = alice_client.post(f"/api/v1/calls/{call.id}/result/", {"result": text}, format="multipart")

    assert response.status_code == 400, response.content[:300]
    assert message in response.json()["result"][0]
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT


def test_external_result_mistakes(
    request_call: RequestCall, alice: User, alice_client: APIClient, operator: User, viewer: User
) -> None:
    with registry.temporarily(LOOKUP):
        invalid = request_call("crm_lookup", {"email": 7}, user=alice)
        call = request_call("crm_lookup", {"email": "c@example.com"}, user=alice)

    assert invalid.status == CallStatus.INVALID and "email: Input should be of type string" in invalid.error
    url = f"/api/v1/calls/{call.id}/result/"
    both = alice_client.post(url, {"result": 1, "error": "x"}, format="json")
    neither = alice_client.post(url, {}, format="json")
    unstorable = alice_client.post(url, {"result": "nul\u0000byte"}, format="json")
    viewer_client = APIClient()
    viewer_client.force_authenticate(viewer)
    stranger = viewer_client.post(url, {"result": 1}, format="json")
    not_external = alice_client.post(f"/api/v1/calls/{invalid.id}/result/", {"result": 1}, format="json")

    assert both.status_code == neither.status_code == 400
    assert unstorable.status_code == 400 and "cannot be stored" in unstorable.json()["detail"]
    assert stranger.status_code == 403
    assert not_external.status_code == 409
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT
    # an operator with the permission may answer for the connector
    from django.contrib.auth.models import Permission

    operator.user_permissions.add(Permission.objects.get(codename="change_toolcall"))
    operator_client = APIClient()
    operator_client.force_authenticate(User.objects.get(pk=operator.pk))
    assert operator_client.post(url, {"result": None}, format="json").status_code == 200


def test_an_external_tool_that_needs_approval_awaits_its_result_once_approved(
    request_call: RequestCall, alice: User, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    from approvals.services import approval_approve

    risky_lookup = Tool.external(
        "risky_lookup", "Look a customer up; needs approval.", {"type": "object", "properties": {}}, risk="high"
    )
    with registry.temporarily(risky_lookup):
        call = request_call("risky_lookup", {}, user=alice)
        assert call.status == CallStatus.PENDING_APPROVAL
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=call.approval_request.pk, user=operator, comment="ok")
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT


@tool(return_behavior=ReturnBehavior.IMMEDIATE)
def price(product: str) -> str:
    """The price of a product."""
    return f"{product}: 9.90"


@tool(return_behavior=ReturnBehavior.IMMEDIATE_IF_LAST)
def finish(summary: str) -> str:
    """End the task with a summary."""
    return summary


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


@tool(return_behavior=ReturnBehavior.IMMEDIATE)
def fails_fast() -> str:
    """Always fails."""
    from toolhub import ToolError

    raise ToolError("not now")


def _turn(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": args} for name, args in calls]}


def test_immediate_tools_end_the_run_with_their_results(start_run: StartRun, alice: User) -> None:
    with registry.temporarily(price, finish, note, fails_fast):
        # every call IMMEDIATE: no second model turn is needed (the script has none)
        immediate = start_run(
            alice, tools=["price"], script=[_turn(("price", {"product": "a"}), ("price", {"product": "b"}))]
        )
        # the last one IMMEDIATE_IF_LAST, the earlier ones IMMEDIATE
        last = start_run(
            alice,
            tools=["price", "finish"],
            script=[_turn(("price", {"product": "a"}), ("finish", {"summary": "done"}))],
        )
        # IMMEDIATE_IF_LAST not last: the model is asked again
        not_last = start_run(
            alice,
            tools=["price", "finish"],
            script=[_turn(("finish", {"summary": "x"}), ("price", {"product": "a"})), {"content": "asked again"}],
        )
        # a TO_LLM call among them: the model is asked again
        mixed = start_run(
            alice,
            tools=["price", "note"],
            script=[_turn(("note", {"text": "x"}), ("price", {"product": "a"})), {"content": "asked again"}],
        )
        # a failed call: the model must see the error
        failed = start_run(
            alice, tools=["fails_fast"], script=[_turn(("fails_fast", {})), {"content": "saw {last_tool_result}"}]
        )

    assert (immediate.status, immediate.output) == (RunStatus.COMPLETED, "a: 9.90\nb: 9.90")
    assert sum(1 for m in immediate.messages if m["role"] == "assistant") == 1
    assert (last.status, last.output) == (RunStatus.COMPLETED, "a: 9.90\ndone")
    assert (not_last.status, not_last.output) == (RunStatus.COMPLETED, "asked again")
    assert (mixed.status, mixed.output) == (RunStatus.COMPLETED, "asked again")
    assert (failed.status, failed.output) == (RunStatus.COMPLETED, "saw not now")
    assert [run.stop_reason for run in (immediate, last, not_last, mixed, failed)] == [
        "immediate_return",
        "immediate_return",
        "answered",
        "answered",
        "answered",
    ]


@tool(one_shot_per_loop=True, advice="Write your script now using the skill body above.")
def load_skill(ctx: ToolContext) -> str:
    """Load the scripting skill."""
    from tests.testapp.models import SideEffect

    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="load_skill")
    return "SKILL BODY"


def test_one_shot_tool_runs_once_per_loop(request_call: RequestCall, start_run: StartRun, alice: User) -> None:
    with registry.temporarily(load_skill):
        first = request_call("load_skill", {}, context={"loop_id": "loop-1"})
        second = request_call("load_skill", {}, context={"loop_id": "loop-1"})
        other_loop = request_call("load_skill", {}, context={"loop_id": "loop-2"})
        no_loop = [request_call("load_skill", {}) for _ in range(2)]
        run = start_run(
            alice,
            tools=["load_skill"],
            script=[_turn(("load_skill", {})), _turn(("load_skill", {})), {"content": "{last_tool_result}"}],
        )

    assert first.result == "SKILL BODY"
    assert second.status == CallStatus.SUCCEEDED
    assert second.result == (
        "ALREADY LOADED. The body of 'load_skill' was returned earlier in this turn \u2014 read it from your "
        "conversation history above. Do not call this tool again.\nWrite your script now using the skill body above."
    )
    assert event_types(second) == ["call.requested", "call.succeeded"]
    assert other_loop.result == "SKILL BODY"
    assert [c.result for c in no_loop] == ["SKILL BODY", "SKILL BODY"]
    # within a run (its loop), the second call did not run either
    assert run.status == RunStatus.COMPLETED and run.output.startswith("ALREADY LOADED.")
    assert SideEffect.objects.filter(tool="load_skill").count() == 5  # loop-1, loop-2, 2 without loop, the run
