"""Review 2026-12-07 (l): review d's left item, a queued call whose dynamic tool became unbuildable.

Each finding's test fails on the code as found (main at 91dbe2c) and says what was found and what is expected.

Findings:

1. A call queued for a worker (approved, or never held) whose dynamic tool was registered again with a definition
   whose schema cannot be built reached ``execution._execute_claimed`` unguarded: ``Tool.version`` (the approval
   binding's check) or ``Tool.validate_arguments`` raised ``ToolDefinitionError`` out of the Celery task. The call
   stayed ``running`` until its lease expired (then ``needs_attention``, or queued again and crashing the worker
   once per lease for an idempotent tool), its run never advanced, and in a claimed batch
   (``WORKER_CLAIM_BATCH``) every call claimed after it was left ``running`` unstarted, to end ``needs_attention``
   as if it might have run. ``execution_checks.refusal_at_execution`` now refuses such a call first
   (``unbuildable_problem``: ``feedback.unbuildable_tool_message``, "nothing was executed") and the worker reads
   ``version`` only of a tool whose schema builds: the call ends ``denied`` with an audit event and its run is
   told, the batch's other calls run.
   ``test_an_approved_call_whose_tool_became_unbuildable_is_denied_by_the_worker``,
   ``test_a_queued_call_whose_tool_became_unbuildable_leaves_its_batch_running``

Also: ``unbuildable_problem`` moved from ``approvals.forms`` to ``toolhub.execution_checks`` (what is checked when
a call goes out), read by the worker, an external call's release, the approval service and the desk's page; it
takes the tool (``None``: not registered).

Checked and holding:

- An external tool's approved call is released through ``refusal_at_execution`` (``waiting._refusal_going_out``):
  it reads the same guard now, and approving such a call is refused before that anyway (review d).
- ``tool_call_require_reapproval`` reads ``version``: only reached for a tool whose schema builds now.
- ``_has_time_for`` reads ``effective_timeout`` only (no schema).
- The inline path (the requesting process runs the call) validates through ``arguments.validate_arguments``,
  which already refuses a ``ToolDefinitionError`` as INVALID (review gk); so do ``pipeline``'s approval binding
  (``version`` read after validation), LangGraph's ``_asked_hash`` (``None`` when refused) and an agentic tool's
  inner call (run only once its request validated, the same cached ``Tool``).
- Grep of every other reader of ``json_schema``/``strict_json_schema``/``input_model``/``version``: REST catalogue
  (``buildable``), MCP ``tools/list`` and ``toolhub_describe_tool``, agent loop and agentic inner lists, adapters'
  tool objects (after ``offered_tools``), ``selectors.withheld_names``, ``Tool.withheld``/``undeclared``
  (``known_json_schema``), ``catalogue`` and ``disclosure.unfolding``'s facade version (code tools: E001 at deploy),
  ``registry._same_definition`` (registration before the freeze only), the sweeper (``idempotent``/``atomic`` only):
  none left that lets one unbuildable tool break another's listing or call.
- The denied call settles through ``call_transition`` as a call of a tool no longer registered does, which notifies
  its run after commit (``calls.notify_settled``); not exercised with a run here.
"""

import pytest
from django.contrib.auth.models import User
from django.db.models import Q

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.helpers import RequestCall, event_types, for_a_worker
from tests.security_review.test_review_2026_12_06_ge import _INTERNALS, _unbuildable
from toolhub.execution import tool_call_execute
from toolhub.models import CallStatus, ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


def _assert_denied_as_unbuildable(call: ToolCall) -> None:
    call.refresh_from_db()
    assert call.status == CallStatus.DENIED, (call.status, call.error)
    assert (
        call.tool_name in call.error and "toolhub.E001" in call.error and "nothing was executed" in call.error.lower()
    )
    assert not [word for word in _INTERNALS if word in call.error] and len(call.error) <= 600
    assert event_types(call)[-1] == "call.denied"


def test_an_approved_call_whose_tool_became_unbuildable_is_denied_by_the_worker(
    request_call: RequestCall, alice: User, acme_operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: an approved call queued for a worker, whose dynamic tool was then registered again with a definition
    whose schema cannot be built, raised ``ToolDefinitionError`` in the worker (``Tool.version``, read to check the
    approval's binding): the task failed, the call stayed ``running`` until its lease expired (then
    ``needs_attention``), its run was never told.

    Expect: the worker denies it in bounded words (tool, E001, hint, nothing executed), with its audit event; the
    worker does not raise.
    """
    ran: list[str] = []
    dynamic = Tool.create(
        "l_held", "Held for an operator.", {"note": (str, "")}, lambda note: ran.append(note), needs_approval=True
    )
    monkeypatch.setattr("toolhub.waiting.dispatch_call", lambda call: None)  # queued, for the worker below
    with registry.temporarily(dynamic):
        held = request_call("l_held", {"note": "held"}, alice, tenant="acme")
        approval_approve(request_id=ApprovalRequest.objects.get(call=held).pk, user=acme_operator)
    held.refresh_from_db()
    assert held.status == CallStatus.QUEUED
    monkeypatch.setitem(registry._tools, "l_held", _unbuildable("l_held"))

    tool_call_execute(call_id=held.id, worker="w1")

    _assert_denied_as_unbuildable(held)
    assert ran == []


def test_a_queued_call_whose_tool_became_unbuildable_leaves_its_batch_running(
    request_call: RequestCall, alice: User, settings: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a queued call (never held) whose dynamic tool became unbuildable raised ``ToolDefinitionError`` in the
    worker (``validate_arguments``); claimed in a batch with it, the tenant's other queued call was left
    ``running``, never started, to end ``needs_attention`` when its lease expired.

    Expect: the broken call denied in bounded words; the other call of the batch runs and succeeds.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 2}
    monkeypatch.setattr("toolhub.pipeline.dispatch_call", lambda call: None)  # this process is the worker
    dynamic = Tool.create("l_queued", "Queued.", {"note": (str, "")}, lambda note: None)
    with registry.temporarily(dynamic), for_a_worker():
        broken = request_call("l_queued", {"note": "first"}, alice, tenant="acme")
        other = request_call("record_effect", {"note": "second"}, alice, tenant="acme")
    assert broken.status == other.status == CallStatus.QUEUED
    monkeypatch.setitem(registry._tools, "l_queued", _unbuildable("l_queued"))

    tool_call_execute(call_id=broken.id, worker="w1")

    _assert_denied_as_unbuildable(broken)
    other.refresh_from_db()
    assert other.status == CallStatus.SUCCEEDED, (other.status, other.error)
    assert not ToolCall.objects.filter(Q(pk=broken.pk) | Q(pk=other.pk), status=CallStatus.RUNNING).exists()
