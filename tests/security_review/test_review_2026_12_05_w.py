"""Review of 2026-12-05 (w): sagas, compensations and the run lifecycle, as a hostile model, member and operator.

Each test fails on the reviewed code (main at a0c4d88) and states who reaches what, where, and what is expected.

Findings: an operator settled by hand the undoing of their own step, which nobody may do for a call (four eyes):
they answered the external compensation that undoes their own step (``POST /api/v1/calls/{id}/result/`` refused
only members without ``toolhub.change_toolcall``), and resolved its compensation by hand in the admin (nothing
looked at whose step it was), so their step stayed done with nobody else deciding; a run's context sent
``compensates``, the key toolhub sets on a saga's compensation to name the step it undoes, so every call of the
run looked like a compensation to its tool (the README: "context keys toolhub sets cannot be sent").

Checked and found holding (no test here): a compensation runs as the step's user and tenant, its grants re-read
when it is requested and again on the worker (``_refusal_at_execution``, ``undoing`` exempts only the standing
check: a user removed from the tenant or deactivated is still undone, a revoked grant or a disabled compensating
tool denies it: ``failed``, the saga ``needs_attention``, the denial in ``last_error``, and a retry after
re-enabling makes a new call that succeeds); its approval excludes the step's user as requester; a run's
cancellation never withdraws a compensation (``_withdrawn_calls``/``_held_requests`` exclude them) and
``tool_call_cancel`` refuses one (409); a member cannot add a step to, or roll back, a colleague's or another
tenant's direct saga (``saga_id_unavailable``, ``direct_saga_owner``, ``visible_saga``: 403/404), nor a run's saga
by its id (refused as unavailable, even before the run's first call: ``saga_key_reserved``); a saga's steps are
its tenant's calls only (``step_calls``), so no rollback compensates another run's or tenant's call; a step is
compensated at most once (one ``Compensation`` per step call, guarded transitions from ``COMPENSATION_TRANSITIONS``,
``recorded`` steps only in a new rollback, ``compensation_retry`` only from failed/unknown/held); every saga and
compensation event is appended to the saga's tenant's chain (``audit_saga``), the compensation's call to the step's
tenant. Runs: retry, cancel and rollback go through ``_operable_run`` (another tenant's run 404, a colleague's 403,
auditors and developers 403); ``run_retry`` moves only a ``failed`` retryable run that is no subagent, through
``RUN_TRANSITIONS`` (completed and cancelled are final); a retried or approved run of someone who left is cancelled
by the loop's standing check before any model turn; the admin's cancel and the sagas' retry/resolve act only on
tenant-scoped rows with ``agents_app``/``sagas.operate_saga`` permissions.

Seen and not fixed: a direct saga's admin page lists only the events filed under its steps' and compensations'
calls (its ``saga.*`` events without a call, e.g. an on-demand rollback's request and the status changes, are on
the audit events page only: ``AuditEvent.data`` is text, no filter reads its ``saga``); a compensation's arguments
are planned when its step is recorded and a retry never plans them again, so after a deploy that changes the
compensating tool's parameters or the mapping a retry fails the same way and only resolving by hand ends it.
"""

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.services import agent_create
from tests.helpers import action_confirmation, console
from tests.security_review.conftest import client_for, rolled_back_step
from tests.tenancy.conftest import make_user
from toolhub import Param, Tool, registry, tool
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus

pytestmark = pytest.mark.django_db

REVOKE = Tool.external(
    "review_w_revoke_access",
    "Revoke a badge (done by the security desk's system, which posts the result).",
    {"type": "object", "properties": {"badge": {"type": "string"}}, "required": ["badge"]},
    idempotent=True,
)


@tool(
    risk="low",
    compensate_with="review_w_revoke_access",
    compensation_mapping=lambda arguments, result: {"badge": arguments["badge"]},
)
def review_w_grant_access(badge: Annotated[str, Param("The badge to open the server room to.")]) -> dict:
    """Open the server room to a badge."""
    return {"badge": badge}


@pytest.fixture
def badge_tools() -> Iterator[None]:
    with registry.temporarily(REVOKE, review_w_grant_access):
        yield


@pytest.fixture
def acme_operator2(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-w2", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_an_operator_answers_the_external_compensation_that_undoes_their_own_step(
    badge_tools: None, acme_operator: User, acme_operator2: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: acme's operator opened the server room to a badge (their own direct saga's step); its compensation is
    an external tool the security desk's system answers. After the rollback the operator posts the compensation's
    result themselves: 200, their step reads ``compensated`` and the desk's system gets 409. ``CallResultView``
    refused a compensation to members only (``toolhub.change_toolcall``), never asking whose step it undoes.

    Expect: 403 for the user whose step it undoes, an operator included (as nobody approves their own call); the
    step stays done until another operator (or the desk's system's account) answers, which still works.
    """
    step = rolled_back_step(
        acme_operator, "badge-w1", "review_w_grant_access", {"badge": "B-7"}, django_capture_on_commit_callbacks
    )
    compensation = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_w_revoke_access")
    assert compensation.status == CallStatus.AWAITING_RESULT and compensation.user_id == acme_operator.id

    with django_capture_on_commit_callbacks(execute=True):
        own = client_for(acme_operator).post(
            f"/api/v1/calls/{compensation.id}/result/", {"result": {"revoked": True}}, format="json"
        )
    step.refresh_from_db()
    assert own.status_code == 403, f"the operator answered the undoing of their own step; it is now {step.status}"
    assert step.status == CallStatus.SUCCEEDED

    with django_capture_on_commit_callbacks(execute=True):
        other = client_for(acme_operator2).post(
            f"/api/v1/calls/{compensation.id}/result/", {"result": {"revoked": True}}, format="json"
        )
    step.refresh_from_db()
    assert other.status_code == 200, other.content
    assert step.status == CallStatus.COMPENSATED


def test_an_operator_resolves_by_hand_the_compensation_of_their_own_step(
    acme_operator: User, acme_operator2: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: acme's operator made a step whose compensation fails (``fragile_step``); after the rollback they pick
    its compensation in the admin and "Resolve by hand" it ("refunded by hand"): resolved, the saga done, nothing
    undone and nobody else involved. ``recovery.compensation_resolve`` took only an actor's name and checked
    nothing about whose step it was.

    Expect: the admin refuses it (an error message, the compensation left as it was) for the user whose step it
    undoes; another operator of the tenant resolves it.
    """
    step = rolled_back_step(
        acme_operator, "fragile-w1", "fragile_step", {"label": "w1"}, django_capture_on_commit_callbacks
    )
    compensation = Compensation.objects.get(step_call=step)
    assert compensation.status in {CompensationStatus.RETRY_SCHEDULED, CompensationStatus.FAILED}
    changelist = "/admin/sagas/compensation/"

    def confirmed(user: User) -> Any:  # through the confirmation page, as a browser posts it (bound to its marks)
        client = console(user)
        form = {
            **action_confirmation(client, changelist, "resolve_selected", [compensation.pk]),
            "note": "refunded by hand",
        }
        return client.post(changelist, form, follow=True)

    page = confirmed(acme_operator)
    compensation.refresh_from_db()
    assert compensation.status != CompensationStatus.RESOLVED, "the operator resolved the undoing of their own step"
    assert "undoes your own step" in page.content.decode()

    confirmed(acme_operator2)
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.RESOLVED and compensation.resolved_by == "user:acme-operator-w2"


def test_a_runs_context_cannot_send_the_step_a_compensation_undoes(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: alice starts a run with ``context={"compensates": "<her step's id>"}``: accepted (201), and every call
    of the run carries it, so ``undo_saga_step`` called by the model reads ``ctx["compensates"]`` as a saga's
    compensation of that step would. Only ``RESERVED_CONTEXT_KEYS`` are refused in a run's context, and
    ``compensates``, which ``sagas.compensating.compensation_request`` sets, was not one of them.

    Expect: 400, as for ``saga_id``; no call of kind ``call`` carries ``compensates``.
    """
    step = rolled_back_step(alice, "ctx-w1", "saga_step", {"label": "w1"}, django_capture_on_commit_callbacks)
    agent_create(
        name="review-w-undoer",
        tenant="acme",
        provider="scripted",
        tools=["undo_saga_step"],
        script=[
            {"tool_calls": [{"name": "undo_saga_step", "arguments": {"step_id": 1, "label": "w1"}}]},
            {"content": "done"},
        ],
    )

    with django_capture_on_commit_callbacks(execute=True):
        started = client_for(alice).post(
            "/api/v1/runs/",
            {"agent": "review-w-undoer", "input": "undo", "context": {"compensates": str(step.id)}},
            format="json",
        )

    forged = ToolCall.objects.filter(kind=CallKind.CALL, context__compensates=str(step.id))
    assert started.status_code == 400, (started.status_code, list(forged.values("tool_name", "context")))
    assert not forged.exists()
    assert ToolCall.objects.filter(kind=CallKind.COMPENSATION, context__compensates=str(step.id)).count() == 1
