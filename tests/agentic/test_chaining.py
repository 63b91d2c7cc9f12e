"""Tool chaining: a returned domain object's @tool methods become the run's tools, stored with the run."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.agentic import sample_tools
from tests.agentic.conftest import Recorder, answer, call
from tests.helpers import event_types
from toolhub.agentic import ChainedType
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


def _call(run: Any, name: str, index: int = 0) -> ToolCall:
    return list(ToolCall.objects.filter(run_id=run.id, tool_name=name).order_by("turn", "position"))[index]


def test_methods_become_callable_once_an_object_is_retrieved_and_the_latest_wins(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [
        call("customer_profile"),
        call("find_customer", id="c1"),
        call("customer_greet", greeting="Hello"),
        call("find_customer", id="c2"),
        call("customer_profile"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["find_customer"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    early = _call(run, "customer_profile")
    assert early.status == CallStatus.INVALID
    assert "none is retrieved yet" in early.error and "find_customer" in early.error
    assert _call(run, "customer_greet").result == "Hello, Ada"
    assert _call(run, "customer_profile", 1).result == "Grace (c2)"
    # hidden until an object is retrieved, shown from then on (auto-discovery from find_customer's return type)
    assert recorder.names(0) == ["find_customer"]
    assert recorder.names(2) == ["find_customer", "customer_profile", "customer_greet", "customer_close_account"]
    # stored under the type's registered name, as the producing call's JSON result
    stored = run.disclosure["chained"]["customer"]
    assert stored["type"] == "customer" and stored["data"] == {"id": "c2", "name": "Grace", "active": True}
    assert stored["call_id"] == str(_call(run, "find_customer", 1).id)
    # a chained call is audited like any other
    assert event_types(_call(run, "customer_greet"))[-1] == "call.succeeded"


def test_predicate_filters_which_objects_bind(make_agent: Any, start_run: Any, alice: User, recorder: Recorder) -> None:
    script = [
        call("find_customer", id="c1"),
        call("find_customer", id="c3"),  # inactive: does not bind, Ada stays
        call("customer_profile"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["find_customer"])

    run = start_run(agent, alice)

    assert _call(run, "customer_profile").result == "Ada (c1)"
    assert run.disclosure["chained"]["customer"]["data"]["id"] == "c1"


def test_chained_object_survives_a_resume(
    make_agent: Any, start_run: Any, alice: User, operator: User, recorder: Recorder, committed: Any
) -> None:
    # given a run that retrieved a customer, then waits for an approval
    script = [
        call("find_customer", id="c2"),
        call("order_processor"),
        call("add_item", sku="s"),
        call("confirm_order"),
        call("charge_card"),
        call("customer_profile"),
        answer(),
    ]
    agent = make_agent(script=script, tools=["find_customer", "order_processor"])
    run = start_run(agent, alice)
    assert run.status == RunStatus.WAITING

    # when the operator approves and the run resumes from its stored state
    charge = ToolCall.objects.get(run_id=run.id, tool_name="charge_card")
    committed(approval_approve, request_id=ApprovalRequest.objects.get(call=charge).pk, user=operator)
    run.refresh_from_db()

    # then the chained method is still there and works on the stored object
    assert run.status == RunStatus.COMPLETED, run.error
    assert _call(run, "customer_profile").result == "Grace (c2)"
    assert "customer_profile" in recorder.names(-1)


def test_denied_method_stays_denied(make_agent: Any, start_run: Any, alice: User, recorder: Recorder) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="customer_greet", user=alice)
    script = [call("find_customer", id="c1"), call("customer_greet", greeting="Hi"), answer()]
    agent = make_agent(script=script, tools=["find_customer"])

    run = start_run(agent, alice)

    assert _call(run, "customer_greet").status == CallStatus.DENIED
    assert "customer_greet" not in recorder.names(1) and "customer_profile" in recorder.names(1)


def test_a_chained_method_follows_approval_rules(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [call("find_customer", id="c1"), call("customer_close_account"), answer()]
    agent = make_agent(script=script, tools=["find_customer"])

    run = start_run(agent, alice)

    held = _call(run, "customer_close_account")
    assert run.status == RunStatus.WAITING
    assert held.status == CallStatus.PENDING_APPROVAL and ApprovalRequest.objects.filter(call=held).exists()
    assert sample_tools.RAN == []


def test_a_method_called_outside_a_run_binds_nothing(request_call: Any, alice: User) -> None:
    with_run = request_call("customer_profile", {}, user=alice)

    assert with_run.status == CallStatus.FAILED
    assert "No customer is retrieved" in with_run.error


def test_chained_type_mistakes_are_refused() -> None:
    class Plain:
        pass

    with pytest.raises(ToolDefinitionError, match="no @tool methods"):
        ChainedType.of(Plain, name="plain")
    with pytest.raises(ToolDefinitionError, match="identifier"):
        ChainedType.of(sample_tools.Customer, name="not a name")
    with pytest.raises(ToolDefinitionError, match="is taken"):
        ChainedType.of(type("Other", (sample_tools.Customer,), {}), name="customer")
