"""Review fa (2026-12-06): review er's compensations governed as the compensation (``is_undoing`` now exempts a call
from its agent's tool list and its user's standing), reviewed hostile.

Each finding's test failed on the code as found (main at 1257a41) and passes now.

Findings:

1. ``_standing_refusal`` returned early for an ``undoing`` principal, before its refusal of a deleted tenant
   (``RetiredTenantSlug``; review bh: "nothing runs in a deleted tenant, whoever asked", since its deny grants and
   approval rules went with it). Review er made an agentic compensation's inner calls ``undoing`` too, so a rollback
   asked after a tenant was deleted had the desk's inner model choose and run tools in that tenant, with its deny
   grants and approval rules gone (before er those inner calls were refused there). Fixed in the shared mechanism:
   the deleted tenant is refused before the ``undoing`` exemption, which now covers the user's standing only: a
   compensation (its own call and its inner calls) in a deleted tenant fails and its saga needs an operator
   (``test_an_agentic_compensation_does_not_run_in_a_deleted_tenant``).

Checked and holding (read in the code, regression tests below):
- Who can set ``compensates`` (what ``is_undoing`` reads besides ``kind=compensation``): REST, MCP ``_meta`` and
  the SDK adapters go through ``toolhub.direct.client_context``, which refuses reserved keys before its allow list
  (an operator listing ``compensates`` in ``CLIENT_CONTEXT_KEYS`` changes nothing); ``run_start`` refuses them
  (the API's ``POST /runs/``); a subagent copies its parent run's stored context (never a call's); the pipeline
  drops reserved keys from an interaction's context (an agentic tool's ``parent_call_id``/``parent_tool``);
  interceptors return arguments only; typed context objects and the hidden context read the context, never write
  it; a remote MCP server never receives reserved keys (``mcp_client.meta.never_forwarded``) and its answer writes
  no context. ``kind`` is set by each entry point (API, MCP, call); only ``compensation_request`` sets
  ``compensation`` and ``compensates``. So only a compensation and the calls made inside it (an agentic tool's inner
  calls inherit their outer call's context) are ``undoing``.
- Budgets: ``_BUDGETED`` excludes ``undoing()`` rows only, which no run turn or inner call of a run's own agentic
  tool can carry: a run cannot make its calls look undoing to escape ``max_tool_calls``.
- An undoing inner call keeps its compensation's tenant (the step's context ``tenant``, which no client sets) and is
  authorized with the step's user's grants (``user_id`` of the step's context) and the approval policy; only the
  agent's tool list, its delegators' denies and the user's standing are not applied. The other principals rebuilt
  from a recorded call (``policy.recorded_call_verdict``, ``approvals.editing``) read no standing (approval rules,
  tenant arguments), so their not reading ``undoing`` changes nothing; the call's ``agent_name`` is stored empty.

- A subagent tool is refused inside an agentic tool (an inner call) and, as a compensation itself, once its run ended
  (``_refuse_unless_going``); a child it starts copies the run's stored context, so it is never ``undoing``.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from tests.security_review.conftest import client_for
from tests.security_review.test_review_2026_12_06_er import UNDO_DESK, _undo_desk_agent, _undone, book_trip
from toolhub.models import CallStatus, RetiredTenantSlug, Tenant, ToolCall
from toolhub.sagas.models import CompensationStatus
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


def test_an_agentic_compensation_does_not_run_in_a_deleted_tenant(
    alice: User, superuser: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: once acme was deleted, a rollback of alice's saga there ran the agentic desk's inner call in acme
    (``undoing`` skipped the deleted-tenant refusal): the desk's model chose and ran a tool in a tenant whose deny
    grants and approval rules were gone. Expect: nothing runs in a deleted tenant; the undo is refused there, with
    the reason, and its inner model runs nothing."""
    _undo_desk_agent()
    with registry.temporarily(book_trip, *UNDO_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/", {"tool": "book_trip", "arguments": {"city": "oslo"}, "saga_id": "trip"}, format="json"
            )
        assert made.status_code in (200, 201, 202), made.content
        step = ToolCall.objects.get(pk=made.json()["id"])
        assert step.status == CallStatus.SUCCEEDED, step.error
        Tenant.objects.get(slug="acme").delete()
        assert RetiredTenantSlug.objects.filter(slug="acme").exists()
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="user:root", by=superuser)

    undo, inner = _undone(step)
    assert inner is None or inner.status != CallStatus.SUCCEEDED, "an inner call ran in a deleted tenant"
    assert undo.status != CompensationStatus.SUCCEEDED
    assert "no longer exists" in (undo.last_error or ""), undo.last_error


@override_settings(TOOLHUB={"CLIENT_CONTEXT_KEYS": ["compensates", "channel"]})
def test_no_client_marks_its_call_undoing(alice: User) -> None:
    """Holds: ``compensates`` makes a call the compensation's (no agent's tool list, no user standing). Expect: a
    REST caller cannot set it, even were an operator to list it among the client context keys; nothing is made."""
    answer = client_for(alice).post(
        "/api/v1/calls/",
        {"tool": "record_effect", "arguments": {"note": "x"}, "context": {"compensates": "1"}},
        format="json",
    )
    assert answer.status_code == 400, answer.content
    assert not ToolCall.objects.filter(context__compensates__isnull=False).exists()


def test_a_run_cannot_be_started_undoing(alice: User) -> None:
    """Holds: a run whose context carried ``compensates`` would have every call exempt from its agent's tool list and
    uncounted by its budget. Expect: ``POST /runs/`` refuses the key; no run is made."""
    from agents_app.models import AgentRun
    from agents_app.services import agent_create

    agent = agent_create(name="plain", provider="scripted", tenant="acme", tools=[], script=[{"content": "hi"}])
    answer = client_for(alice).post(
        "/api/v1/runs/", {"agent_id": agent.pk, "input": "go", "context": {"compensates": "1"}}, format="json"
    )
    assert answer.status_code == 400, answer.content
    assert not AgentRun.objects.exists()


def test_mcp_meta_and_an_interaction_cannot_mark_a_call_undoing() -> None:
    """Holds: MCP's ``_meta`` drops unknown keys instead of refusing them (``strict=False``), and an interaction's
    context (an agentic tool's inner call) is layered over the call's. Expect: ``compensates`` is refused from
    ``_meta`` whatever the allow list, and dropped from an interaction, so neither makes a call ``is_undoing``."""
    from toolhub.authorization import CallPrincipal
    from toolhub.direct import CallerContextError, client_context
    from toolhub.models import is_undoing
    from toolhub.pipeline import CallRequest, _effective_context
    from toolhub.tools.context import ToolContext

    with override_settings(TOOLHUB={"CLIENT_CONTEXT_KEYS": ["compensates"]}):
        with pytest.raises(CallerContextError):
            client_context({"compensates": "1"}, strict=False)
    request = CallRequest(
        tool_name="record_effect",
        arguments={},
        principal=CallPrincipal(user_id=1, username="alice", tenant="acme"),
        context=ToolContext(tenant="acme", user_id=1),
        interaction_context={"compensates": "1", "parent_tool": "desk"},
    )
    context = _effective_context(request)
    assert context.get("parent_tool") == "desk"
    assert not is_undoing("inner", context.as_dict())
