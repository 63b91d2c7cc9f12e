"""Review 2026-12-07 (n): review f's bad input end to end (``test_review_2026_12_07_f``), through the framework
adapters f did not reach: a model whose tool call (its id, its arguments) holds a NUL, a lone surrogate or NaN.

Each finding's test fails on the code as found (main at 91dbe2c) and says what was found and what is expected.

Findings:

1. (Any database) A LangGraph agent (``toolhub.adapters.langgraph``) whose model gave a tool call an id holding a
   lone surrogate (JSON's ``"\\ud800"``, which a provider's answer may hold) crashed the graph run:
   ``langgraph_call_id`` encoded ``thread_id\\x00tool_call_id`` to UTF-8 for ``uuid5`` and raised
   ``UnicodeEncodeError`` out of ``agent.invoke`` (from the approval gate's ``_needs_review`` or the tool itself),
   neither a bounded error nor a tool message. Escaping the id (``storable_text``) is not enough: LangGraph's
   checkpoint serializer keeps a lone surrogate as ``"?"``, so the resumed run's tool call id differs from the
   paused one, derives another call, files a second approval request for the same action and tells the model it
   waits (found while fixing). ``langgraph_call_id`` now reads a lone surrogate as ``"?"`` (UTF-8 ``replace``), as
   the checkpoint keeps it: the run pauses, the operator's approval runs the call once, the resumed run reads its
   result. ``test_a_langgraph_tool_call_id_with_a_lone_surrogate_pauses_and_resumes_to_one_call``.

Checked and holding (PostgreSQL, scripted models, ``assert_audit_intact`` after each; no test kept, each takes
10-25 s of transactional set-up):

- The other adapters' paused state: neither Pydantic AI nor LangGraph has toolhub store it (the caller keeps the
  message history / the checkpointer does); only the OpenAI Agents SDK adapter writes a ``PausedAgentRun`` (f's fix).
- Pydantic AI (``ToolhubToolset``): a tool call id ``"call\\ud800"`` or ``"call\\x00"``, low risk (runs once, model
  reads the result) and high risk (pauses, ``pending_approvals``, approved over the API, ``operator_decisions``,
  resumed run runs it once): ``request_key`` hashes with ``surrogatepass``, the client's ``tool_call_id`` is kept
  in the audit event's JSON text; audit intact.
- LangGraph: a tool call id ``"call\\x00"`` (low and high risk) runs once; arguments holding a NUL, a lone
  surrogate, NaN, or a key holding a NUL: the call is ``invalid`` with the bounded message ("Invalid arguments;
  nothing was executed: note contains a NUL character." ...), nothing run, the model reads the message. An integer
  past 2**64 in the arguments fails in LangGraph's own ``InMemorySaver`` (msgpack) before toolhub sees it: not
  toolhub's.
"""

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from tests.helpers import assert_audit_intact
from tests.interop.langgraph.test_langgraph_adapter import Agent, agent_for, asks, start, tool_messages
from tests.testapp.models import SideEffect
from toolhub.models import CallStatus, ToolCall

__all__ = ["agent_for"]  # the LangGraph adapter tests' fixture, used here

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_langgraph_tool_call_id_with_a_lone_surrogate_pauses_and_resumes_to_one_call(
    agent_for: Agent, operator_client: APIClient, alice: User
) -> None:
    """The model asks for a high-risk tool with the tool call id ``"call\\ud800"``.

    Found: ``agent.invoke`` raised ``UnicodeEncodeError`` (``langgraph_call_id``); escaped instead, the resumed run
    (its id read back from the checkpoint as ``"call?"``) filed a second approval request and the model read that
    the call waits.
    Expect: the run pauses with one approval request; approved, the call runs once; the resumed run reads its
    result; one call, the audit verifies.
    """
    agent, hub, config = agent_for(asks("risky_effect", {"note": "kept"}, call_id="call\ud800"))

    paused = start(agent, config)

    (review,) = hub.request_approvals(paused.interrupts, config)
    approval = ApprovalRequest.objects.get()
    assert review.approval_id == approval.pk
    assert not SideEffect.objects.exists()
    approved = operator_client.post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    assert approved.status_code == 200, approved.content
    command = hub.resume_command(paused.interrupts, config)
    assert command is not None

    finished = agent.invoke(command, config, version="v2")

    effect = SideEffect.objects.get()
    assert effect.note == "kept"
    (message,) = tool_messages(finished)
    assert message.content == f'{{"effect_id": {effect.pk}}}'
    call = ToolCall.objects.get()
    assert (call.pk, call.status, call.user_id) == (review.call_id, CallStatus.SUCCEEDED, alice.pk)
    assert ApprovalRequest.objects.count() == 1
    assert_audit_intact()
