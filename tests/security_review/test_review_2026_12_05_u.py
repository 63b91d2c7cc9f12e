"""Review of 2026-12-05 (u): regressions in the newest commits (8bfd40c..b5fc907, reviews s and t).

Each test fails on the reviewed code (main at b5fc907) and states who reaches what, where, and what is expected.

Findings: the releasing event's ``approved_by`` named approvers by their current username, so a rename between
approval and release made the trail name someone no approval on it carries (``services._approvers_counted``); a
pydantic model's field described by ``Param`` (which the model now reads) counted as undescribed for toolhub
(``signatures.describe_model``): refused under ``REQUIRE_PARAMETER_DESCRIPTIONS``, empty in ``Tool.parameters``.

Checked and found holding (no test here): ``Param.__get_pydantic_json_schema__`` gives exactly the schema
``Field(description=...)`` gives (a ``$ref``'d nested model: ``{"$ref", "description"}``; ``Optional``: the description
beside the ``anyOf``; inside ``list[...]``: on the items), so ``strict.strict_schema`` and the openai-strict,
anthropic, gemini and compact profiles export it alike and ``profile_problems`` finds nothing; with both on one
field pydantic's ``Field`` description wins (now also what ``describe_model`` reports). Tools whose schema changed
get a new ``Tool.version``: a call approved under the old one goes back to ``pending_approval`` at the worker
(``execution._execute_claimed`` -> ``tool_call_require_reapproval``, README "if the tool changes before a worker
runs the call"), never running on the old approval; ``withheld_names`` is stricter, not looser, for an old version.
``approvers_still_counting``: while approvals are missing it is ``approvers_of`` (active, decide permission, tenant
member or cross-tenant operator, groups) minus this round's givers; once the quorum stands it is the counted givers,
each passed through ``approval_may_decide`` (inactive users fail ``has_perm``), so neither the desk nor the e-mails
name or write to a deactivated user or one outside the tenant; the desk and change page stay within
``tests/posture`` query counts (PostgreSQL). Demo ledger: ``_undone`` finds the entry only on the account of
``ctx.tenant`` (another tenant's account or ``tx_id`` is "nothing to undo"), and checks "already undone" after
``select_for_update`` on the account, so two compensations serialize and the one-to-one ``reverses`` is not hit
(no IntegrityError); the admin's raw id box for ``reverses`` is scoped (``TenantScopedAdmin.formfield_for_foreignkey``).
"""

from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel

from approvals.models import ApprovalStatus
from approvals.selectors import approval_progress
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold, third_operator  # noqa: F401 - fixtures
from toolhub import Param
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import AuditEvent
from toolhub.tools.definition import Tool

pytestmark = pytest.mark.django_db


def _fresh(user: User) -> User:
    """The user as a new login reads them."""
    return User.objects.get(pk=user.pk)


def test_approved_by_names_an_approver_by_a_name_that_no_approval_on_the_trail_carries(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """An auditor reads the trail of alice's critical call (two approvers). ``operator`` approved; an
    administrator then renamed that account to ``operator-renamed`` (a username is editable in the admin);
    ``operator2`` approved and released the call.

    Found: ``approvals.services._approvers_counted`` writes ``approved_by`` with each giver's *current* username
    (``ApproverStanding.username``), while the approval's own event (actor ``operator:operator``), its decision row
    (``decided_by_name``) and the desk's "Approved in this round by" (``round_standing.given_by``) carry the name
    the approver had when approving: the releasing event says ``["operator-renamed", "operator2"]``, a name no
    approval on the trail carries, so the auditor cannot match the release to the approvals it counted (and a
    later rename of another account to ``operator`` would make one person appear to count twice).
    Expect: ``approved_by`` names the counted approvals as they are recorded, ``["operator", "operator2"]``.
    """
    request = hold(approvers=2)
    approval_approve(request_id=request.pk, user=operator, expected_round=1)
    User.objects.filter(pk=operator.pk).update(username="operator-renamed")
    request.refresh_from_db()
    assert approval_progress(request).given_by == ["operator"]  # the desk: the recorded name

    approval_approve(request_id=request.pk, user=_fresh(second_operator), expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED

    events = list(AuditEvent.objects.filter(call_id=request.call_id, event_type="approval.approve").order_by("seq"))
    assert [event.actor for event in events] == ["operator:operator", "operator:operator2"]
    assert events[-1].payload.get("approved_by") == ["operator", "operator2"], events[-1].payload


class _Research(BaseModel):
    task: Annotated[str, Param("What to research.")]


def test_a_model_field_described_by_param_is_refused_as_undescribed(settings: Any) -> None:
    """A developer follows the README: "descriptions: ``Param("...")`` (on a parameter or a field of a pydantic
    model) ...; ``TOOLHUB["REQUIRE_PARAMETER_DESCRIPTIONS"] = True`` makes them mandatory", and describes an
    ``input_model``'s field (as the README's subagent snippet does) with ``Param``.

    Found: since e5d4aa7 the model reads the description (``Param.__get_pydantic_json_schema__``), but
    ``toolhub.tools.signatures.describe_model`` still reads only ``FieldInfo.description``: with the setting on the
    tool is refused at registration ("has no description ... add Field(description=...)"), and without it the
    parameter's description is empty where toolhub reads it (``Tool.parameters``: the tool search's index).
    Expect: a field described by ``Param`` counts as described, and its description is the parameter's.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "REQUIRE_PARAMETER_DESCRIPTIONS": True}
    try:
        research = Tool.from_function(
            lambda task: task, name="research_u", description="Research.", input_model=_Research, output_model=str
        )
    except ToolDefinitionError as exc:
        pytest.fail(f"a field described by Param is refused: {exc}")
    assert research.json_schema["properties"]["task"]["description"] == "What to research."
    assert [p.description for p in research.parameters] == ["What to research."]
