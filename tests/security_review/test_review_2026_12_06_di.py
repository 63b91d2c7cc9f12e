"""Review 2026-12-06 di: a review of reviews db (an agent's denies carried to its subagents) and de (pending approval
requests judged on the approver rules as they stand now).

Each finding's test failed on the reviewed code (main at 59f9610) and passes now.

Findings:

1. A subagent whose agent has the name of one of the agents that started it (an agent asking a subagent of its own
   name, or a tenant's agent under a global one of the same name) was refused a tool granted to its own agent by an
   ALLOW grant: ``authorize_tools`` read every loaded grant naming a delegator as that delegator's deny, whatever its
   effect. Only DENY grants are read as the delegators' now
   (``test_an_allow_to_a_subagents_own_agent_is_not_read_as_an_ancestors_deny``).
2. A child records its ancestors' agents by name at its start: the parent's agent renamed while the child ran, a deny
   under the new name refused the parent's calls and not the child's (and a deny to another agent taking the old name
   reached the child). A rename now renames the agent in the ``delegated_by`` of the runs below its runs, in the
   save's transaction (``agents_app.delegation``, a pre/post-save receiver pair as for moved memberships)
   (``test_a_deny_to_the_parents_agent_under_its_new_name_holds_in_the_child``).

Checked and holding:
- a deny given to the root run's agent two levels up holds in the grandchild (``delegated_by`` is the whole chain,
  root first) and is named in the refusal; the run's principal carries the chain;
- an ALLOW grant to the parent's agent does not reach the child: a tool its agent does not list stays unavailable;
- agent names are unique only within a tenant: a deny bound to globex's ``planner`` does not reach acme's child of
  its ``planner``, one bound to acme's (or to no tenant) does;
- the child's tools shown to its model through the context's principal (``principal_of_context``: tool_search,
  unfolding, the unknown-tool suggestions) leave out the tool denied to an ancestor;
- a deny added while the child runs is seen at its next authorization (the grants' cache key holds ``delegated_by``
  and the governance stamp moves);
- the backfill (migration 0016) gives each level its whole chain, root first; it cannot meet a tree with deleted
  parents: ``parent_run`` is PROTECT;
- de: a request whose tool left its restricted tool group keeps the copied restriction (decision, ``approvers_of``
  and the desk agree); a rule lowered after creation leaves the stored count (the decision, the desk, the API); a
  held compensation meets a restriction and a count raised after it opened, who rolled back never approving it.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from agents_app.loop import run_principal
from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, agent_update
from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from approvals.selectors import approval_progress, approvers_of
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.security_review.conftest import client_for
from tests.security_review.test_review_2026_12_06_de import _group
from tests.security_review.test_review_2026_12_06_z import invoice_tools  # noqa: F401 - a fixture
from tests.tenancy.conftest import make_user
from toolhub.authorization import CallPrincipal, authorization_denial, authorize_tools, principal_of_call
from toolhub.disclosure.principals import principal_of_context
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import CallKind, CallStatus, Grant, GrantEffect, Tenant, ToolGroup
from toolhub.pipeline import visible_tool_names
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db


def _principal(alice: User, agent: str, *delegated_by: str, tools: tuple[str, ...] = ()) -> CallPrincipal:
    return CallPrincipal(
        user_id=alice.pk,
        username=alice.username,
        tenant="acme",
        agent_name=agent,
        agent_tools=frozenset(tools),
        delegated_by=delegated_by,
    )


def test_an_allow_to_a_subagents_own_agent_is_not_read_as_an_ancestors_deny(alice: User) -> None:
    """Found: a child of an agent of the same name (``researcher`` asking ``researcher``) was refused ``record_effect``
    which an ALLOW grant gives its agent: the grant names a delegator, and every such grant was read as a deny.

    Expect: the child may call it (the ALLOW is its own agent's); a DENY to that name still refuses it.
    """
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="record_effect", agent_name="researcher")
    child = _principal(alice, "researcher", "planner", "researcher")

    assert authorization_denial("record_effect", child) is None

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="researcher")
    assert "denied to agent 'researcher'" in (authorization_denial("record_effect", child) or "")


def test_a_deny_two_levels_up_holds_in_the_grandchild(alice: User) -> None:
    """Checked (holds): a deny to the root run's agent, the grandchild's run recording the chain.

    Expect: the grandchild (its own agent lists the tool) is refused, naming the root's agent; its run's principal
    carries the chain root first; an ALLOW to the parent's agent gives the child nothing its agent does not list.
    """
    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    analyst = agent_create(name="analyst", tenant="acme", provider="scripted", script=[], tools=["record_effect"])
    root = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.WAITING)
    middle = AgentRun.objects.create(
        agent=planner, user=alice, tenant="acme", parent_run=root, depth=1, delegated_by=["planner"]
    )
    grandchild = AgentRun.objects.create(
        agent=analyst, user=alice, tenant="acme", parent_run=middle, depth=2, delegated_by=["planner", "planner"]
    )
    principal = run_principal(grandchild)
    assert principal.delegated_by == ("planner", "planner")
    assert authorization_denial("record_effect", principal) is None

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner")
    assert "'planner', whose run started this one" in (authorization_denial("record_effect", principal) or "")

    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="calculate", agent_name="planner")
    assert "not available to agent 'analyst'" in (authorization_denial("calculate", principal) or "")


def test_a_deny_bound_to_another_tenants_agent_of_the_name_does_not_reach_the_child(
    alice: User,
    globex_user: User,  # makes tenant globex
) -> None:
    """Checked (holds): agent names are unique within a tenant only.

    Expect: a deny to globex's ``planner`` leaves acme's child alone; one to acme's ``planner`` refuses its tool.
    """
    child = _principal(alice, "researcher", "planner", tools=("record_effect",))
    globex, acme = Tenant.objects.get(slug="globex"), Tenant.objects.get(slug="acme")
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner", agent_tenant=globex)
    assert authorization_denial("record_effect", child) is None

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner", agent_tenant=acme)
    assert authorization_denial("record_effect", child) is not None


def test_the_childs_context_principal_hides_a_tool_denied_to_its_parent(alice: User) -> None:
    """Checked (holds): what tool_search, unfolding and the unknown-tool suggestions read (``principal_of_context``).

    Expect: its principal carries the run's chain; the tool denied to the parent's agent is not visible; a deny added
    while the child runs is seen by the next authorization.
    """
    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    researcher = agent_create(
        name="researcher", tenant="acme", provider="scripted", script=[], tools=["record_effect", "calculate"]
    )
    parent = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.WAITING)
    child = AgentRun.objects.create(
        agent=researcher, user=alice, tenant="acme", parent_run=parent, depth=1, delegated_by=["planner"]
    )
    context: dict[str, Any] = {"tenant": "acme", "user_id": alice.pk, "agent": "researcher", "run_id": str(child.id)}
    principal = principal_of_context(ToolContext(context))
    assert principal.delegated_by == ("planner",)
    assert authorize_tools(["record_effect", "calculate"], principal) == {"record_effect": None, "calculate": None}

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner")
    assert "record_effect" not in visible_tool_names(principal, context)
    assert "calculate" in visible_tool_names(principal, context)


def test_a_tool_that_left_its_restricted_group_keeps_the_restriction_of_its_pending_request(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Checked (holds): never looser than at creation.

    Expect: after the tool leaves the treasury's group, an operator outside it is still refused, ``approvers_of`` and
    the desk name the treasury only, its member releases the call.
    """
    treasury = _group("treasury", second_operator)
    group = ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)
    request = hold()
    assert request.approver_group == treasury

    group.extra_tools = []
    group.save()

    assert [user.username for user in approvers_of(request)] == ["operator2"]
    assert approval_progress(request).may_approve == ["operator2"]
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
    approval_approve(request_id=request.pk, user=second_operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED


def test_a_rule_lowered_after_creation_asks_no_fewer_approvals(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Checked (holds): a rule lowered from two approvers to one after the request opened.

    Expect: one approval leaves it pending; the desk and the API say two are needed; a second releases it.
    """
    rule = ApprovalRule.objects.create(name="payments", tool_name="risky_effect", required_approvals=2)
    request = hold("pay 7", approvers=2)
    rule.required_approvals = 1
    rule.save()

    approval_approve(request_id=request.pk, user=operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert (approval_progress(request).needed, approval_progress(request).remaining) == (2, 1)
    shown: dict[str, Any] = client_for(second_operator).get(f"/api/v1/approvals/{request.pk}/").json()
    assert shown["required_approvals"] == 2, shown
    approval_approve(request_id=request.pk, user=second_operator, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED


def test_a_deny_to_the_parents_agent_under_its_new_name_holds_in_the_child(alice: User) -> None:
    """Found: a child recorded its ancestors' agents by name at its start; the parent's agent renamed while the child
    ran, a deny to it under the new name refused the parent's calls but not the child's (and a deny to another agent
    that took the old name reached the child).

    Expect: the child's recorded chain follows the rename (its run and the worker's read): the deny to the new name
    refuses the grandchild's and the child's tool; the old name no longer binds them; other runs keep theirs.
    """
    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    researcher = agent_create(name="researcher", tenant="acme", provider="scripted", script=[], tools=["record_effect"])
    parent = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.WAITING)
    child = AgentRun.objects.create(
        agent=researcher, user=alice, tenant="acme", parent_run=parent, depth=1, delegated_by=["planner"]
    )
    grandchild = AgentRun.objects.create(
        agent=researcher,
        user=alice,
        tenant="acme",
        parent_run=child,
        depth=2,
        delegated_by=["planner", "researcher"],
    )
    other_root = AgentRun.objects.create(agent=researcher, user=alice, tenant="acme")
    other = AgentRun.objects.create(
        agent=researcher, user=alice, tenant="acme", parent_run=other_root, depth=1, delegated_by=["researcher"]
    )

    agent_update(agent=planner, changes={"name": "planner-v2"}, changed_by=None)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner-v2")

    for run in (child, grandchild):
        run.refresh_from_db()
        assert "'planner-v2'" in (authorization_denial("record_effect", run_principal(run)) or ""), run.delegated_by
        at_worker = principal_of_call(user_id=alice.pk, tenant="acme", agent_name="researcher", run_id=run.id)
        assert at_worker.delegated_by[0] == "planner-v2"
    assert grandchild.delegated_by == ["planner-v2", "researcher"]
    other.refresh_from_db()
    assert other.delegated_by == ["researcher"]

    agent_update(agent=researcher, changes={"name": "researcher-v2"}, changed_by=None)
    chains = dict(AgentRun.objects.values_list("id", "delegated_by"))
    assert (chains[child.id], chains[grandchild.id], chains[other.id]) == (
        ["planner-v2"],
        ["planner-v2", "researcher-v2"],
        ["researcher-v2"],
    )


@pytest.mark.django_db(transaction=True)
def test_the_backfill_gives_each_level_its_whole_chain() -> None:
    """Checked (holds): migration 0016 on a tree of three levels and a run started by a person.

    Expect: root first, each child's list is its parent's and its parent's agent; the root's stays empty.
    """
    before, after = (
        [("agents_app", "0015_agent_call_limit_conversation_size")],
        [("agents_app", "0016_agentrun_delegated_by")],
    )

    def migrate(targets: list[tuple[str, str]]) -> Any:
        executor = MigrationExecutor(connection)
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps

    old = migrate(before)
    try:
        provider = old.get_model("agents_app", "ModelProvider").objects.create(name="scripted-di", kind="scripted")
        agent_model, run_model = old.get_model("agents_app", "Agent"), old.get_model("agents_app", "AgentRun")
        planner, researcher, analyst = (
            agent_model.objects.create(name=name, provider=provider) for name in ("planner", "researcher", "analyst")
        )
        root = run_model.objects.create(agent=planner, tenant="acme")
        child = run_model.objects.create(agent=researcher, tenant="acme", parent_run=root, depth=1)
        grandchild = run_model.objects.create(agent=analyst, tenant="acme", parent_run=child, depth=2)
        new = migrate(after)
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes("agents_app"))

    chains = dict(new.get_model("agents_app", "AgentRun").objects.values_list("id", "delegated_by"))
    assert [chains[root.id], chains[child.id], chains[grandchild.id]] == [[], ["planner"], ["planner", "researcher"]]


def test_a_held_compensation_meets_the_approver_rules_as_they_stand_now(
    invoice_tools: None,  # noqa: F811 - the fixture
    alice: User,
    tenant: Tenant,
    roles: dict[str, Group],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Checked (holds): a compensation's approval request (its asker is who rolled back) after its tool joined a
    restricted group and a rule asked two approvers.

    Expect: an operator outside the treasury is refused and not listed; the treasury's two members release it, one
    approval leaving it pending; who rolled back is never an approver.
    """
    a, b, c, d = (make_user(f"acme-op-di{n}", tenant=tenant, staff=True, groups=(roles["operators"],)) for n in "abcd")
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).post("/api/v1/sagas/", {"saga_id": "inv-di"}, format="json").status_code == 201
        client_for(alice).post(
            "/api/v1/calls/",
            {"tool": "review_z_issue_invoice", "arguments": {"invoice": "I-9"}, "saga_id": "inv-di"},
            format="json",
        )
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(a).post("/api/v1/sagas/inv-di/rollback/", format="json").status_code == 202
    request = ApprovalRequest.objects.get(call__kind=CallKind.COMPENSATION, call__saga_id="inv-di")
    assert request.status == ApprovalStatus.PENDING and request.required_approvals == 1

    ToolGroup.objects.create(
        name="invoices", extra_tools=["review_z_void_invoice"], approver_group=_group("ap", a, c, d)
    )
    ApprovalRule.objects.create(name="voids", tool_name="review_z_void_invoice", required_approvals=2)

    assert [user.username for user in approvers_of(request)] == ["acme-op-dic", "acme-op-did"]
    for refused in (a, b):
        with pytest.raises(DecisionNotAllowedError):
            approval_approve(request_id=request.pk, user=refused, expected_round=1)
    with django_capture_on_commit_callbacks(execute=True):
        approval_approve(request_id=request.pk, user=c, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and approval_progress(request).may_approve == ["acme-op-did"]
    with django_capture_on_commit_callbacks(execute=True):
        approval_approve(request_id=request.pk, user=d, expected_round=1)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert request.call.status == CallStatus.SUCCEEDED, request.call.status
