"""Review 2026-12-06 gn: four eyes across entrances (who asked, who approves, through which door).

Probed whether one person can be both the asker and a counted approver of a call through any combination of
entrances (REST with a token, MCP with a key, an agent run, a subagent run, a compensation's retry, a saga's
rollback, the desk's page, its bulk actions, the REST decision), at main b4a99d8.

Findings: none. Each door was found holding; the tests below hold the combinations no earlier review held as such.

Checked and holding:
- One decision path: the desk's page (``decide_view``), its bulk actions, ``POST /api/v1/approvals/{id}/approve/``
  and ``reject/`` all call ``approvals.services.approval_approve`` / ``approval_reject``, which lock the request,
  re-read the decider (``decider_as_now``) and judge them by ``approval_may_decide`` (requester, then askers, then
  the approver restrictions: the superuser exemption comes after the first two). MCP and the framework adapters
  (Pydantic AI, LangGraph, OpenAI Agents) have no decision door: they only read a call's state
  (``toolhub.adapters._common.pause_decision``) and answer a released call as approved.
- Who is the requester: every entrance sets ``ToolCall.user`` from the authenticated person (REST token, MCP key,
  ``run_start``'s user), a subagent's run takes its parent's user, a compensation (and an agentic compensation's
  inner calls) its step's user, so ``ApprovalRequest.requested_by`` is the run's owner for every call of a run tree.
  No entrance starts a run or a call in another person's name (``run_start`` callers: the runs API only).
- Who else asked: an operator's run retry (``retried_by``, copied to a subagent at its start; a parent fails
  retryable only on a model turn, when no child of it goes), a saga rollback's ``asked_by`` (run and direct sagas,
  REST, every rollback asked while the step ran), a compensation's retriers (``retried_by``): all read by
  ``_askers`` when a request opens or reopens. After a release no asker can be added (a run or compensation is
  retried only once failed), so the worker's fast path (review gb: nothing read under an unchanged governance stamp)
  misses no asker; every standing input (users' active and superuser bits, groups, permissions, memberships, rules)
  is a watched governance table.
- Counting: one person counts once per round whatever the door (``givers`` keyed by user id in ``_approvers_counted``
  and by ``ApproverStanding``, in the worker's ``_lapsed`` too); an edit by anyone but the requester or an asker opens
  a new round counting the editor once; a confirmation adds no row.
- Superusers (README "Four eyes"): exempt from the tool groups' approver group and permission (and, as everywhere,
  from tenant membership: README's tenant boundary), held to the requester and askers rule, one approval per
  version and distinct approvers; the README says exactly that (``tests/security_review/test_review_2026_12_06_bx.py``).
- Not a four-eyes defect (noted for the lead): an agent's manager who writes a scripted agent's turns chooses the
  calls (tool and arguments) a member's run of it asks for, and may approve them; an approver can make any held call
  say anything by editing it anyway (an edit is its editor's approval), so this gives them nothing more.
"""

from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import Group, User

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.approvals.conftest import Hold, hold  # noqa: F401 - fixtures, registered by being imported here
from tests.helpers import console
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi: the fixture
from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub.models import AuditEvent, Grant, ToolCall

DESK = "/admin/approvals/approvalrequest/"


@pytest.mark.django_db(transaction=True)
def test_a_call_asked_over_mcp_is_not_approved_by_its_asker_on_the_desk_nor_over_rest(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    operator: User,
) -> None:
    """Found: nothing (holds). Expect: alice, an operator too, asks for a held call over MCP with her key; she is
    refused on the desk's page and over REST (403), nothing is recorded, and another operator's approval runs it."""
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    alice.groups.add(Group.objects.get(name="operators"))
    Grant.objects.create(tool_name="risky_effect", user=alice)

    async def ask(client: Any) -> Any:
        return await client.call_tool("risky_effect", {"note": "wire money"})

    held = with_client(live_asgi, token(alice), ask).meta["io.toolhub/call"]
    request = ApprovalRequest.objects.get(pk=held["approval_id"])
    assert request.requested_by_id == alice.pk and ToolCall.objects.get().kind == "mcp"

    page = console(alice).post(f"{DESK}{request.pk}/approve/", {"comment": "mine", "round": "1"}, follow=True)
    said = [str(message) for message in page.context["messages"]]
    assert any("You started this call" in message for message in said), said
    api: Any = client_for(alice).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert api.status_code == 403 and "You started this call" in str(api.data), api.content
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and not request.decisions.exists()

    approved = httpx2.post(
        f"{live_asgi}/api/v1/approvals/{request.pk}/approve/",
        json={"round": 1},
        headers={"Authorization": f"Token {token(operator)}"},
    )
    assert approved.status_code == 200, approved.text
    assert ToolCall.objects.get().status == "succeeded" and SideEffect.objects.count() == 1


@pytest.mark.django_db
def test_one_operator_approving_over_rest_and_on_the_desk_counts_once(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Found: nothing (holds). Expect: a critical call (two approvers) approved by the same operator over REST and
    then on the desk's page keeps one approval and stays pending ("already approved"); another operator's approval
    on the desk releases it, the trail naming both once."""
    request = hold(approvers=2)

    api: Any = client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert api.status_code == 200, api.content
    page = console(operator).post(f"{DESK}{request.pk}/approve/", {"comment": "again", "round": "1"}, follow=True)
    said = [str(message) for message in page.context["messages"]]
    assert any("already approved this version" in message for message in said), said
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert list(request.decisions.values_list("decided_by_id", flat=True)) == [operator.pk]

    console(second_operator).post(f"{DESK}{request.pk}/approve/", {"comment": "ok", "round": "1"})
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    events = AuditEvent.objects.filter(call_id=request.call_id, event_type="approval.approve").order_by("seq")
    assert [event.payload["approved_by"] for event in events] == [["operator"], ["operator", second_operator.username]]
