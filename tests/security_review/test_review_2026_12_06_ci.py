"""Review 2026-12-06 (ci): the framework adapters and the interop surfaces, at the tenant boundary and four eyes.

Each test fails on the reviewed code (main at 3b32380) and passes after the fix.

Findings:

1. The admin list of paused OpenAI Agents SDK runs (``PausedAgentRunAdmin``: one row per SDK pause, never deleted)
   searched with Django's ``icontains`` over ``agent_name`` and ``run_key``: a LIKE over every row of the viewer's
   tenants whatever the term (review bs left it: "small tables, except paused runs"), outside the console's rule
   that a list matches only by comparisons an index answers. Now ``ExactSearchMixin``: a paused run's id, or exactly
   its run key, tenant or user's name.
2. The same list was sorted by default on ``created_at``, a column no index held (every page sorted all of the
   tenant's rows; ``?o=`` on the column was refused by ``IndexedSorting`` while the default order did exactly that),
   counted the whole table (Django's paginator) and fetched every listed row's stored ``RunState`` (the SDK run's
   conversation, never shown). Now ``created_at`` is indexed (migration ``0002``) and the list is a
   ``LeanChangeListMixin`` list fetching only the columns it shows, counted within a bound.
3. A resume whose SDK run failed gave the paused run back (``paused_run_release``: ``resumed`` to ``paused``) with
   nothing in the trail: each call's chain read ``openai_agents.resumed`` for a run that did not go on, and a second
   resume wrote a second ``resumed`` with no step between (a transition without its audit event, against the
   pipeline's rule). Now the release writes ``openai_agents.released`` (by the run's user) in each call's chain, in
   the same transaction as the row's move, and only when the row moved.
4. An SDK run interrupted on a toolhub call and on a tool that is not toolhub's (an SDK ``function_tool`` with
   ``needs_approval``) was refused (``AdapterError``: "Only toolhub tools can pause a governed run") and not stored,
   but its toolhub call, requested when the SDK asked ``needs_approval``, stayed held on the approval desk: an
   operator approving it ran it (a side effect) for a run nobody could resume, its result read by no model. Now the
   refusal withdraws the run's held calls first (``paused_run_refused``: ``tool_call_cancel`` by the run's user, its
   request ``cancelled``, audited); a call decided meanwhile is left as decided.

Checked and holding (probed or read, no test here):
- ``paused_run_claim`` reads only the user's own paused run within their tenants and their standing
  (``standing_refusal``): another tenant's member, or another user of the same tenant, gets "No paused run with
  this id is waiting for you" (the same answer as a missing id); ``paused_runs_ready`` lists only the user's own.
- A paused run's calls are read with ``tenant=run.tenant`` and mapped to an SDK decision only by
  ``pause_decision`` (an allowlist of released statuses): approving in the SDK alone runs nothing; a call withdrawn
  by its requester, rejected, expired or refused is rejected in the SDK with the call's sanitized ``model_text``.
- The adapters decide nothing: every approval is an ``ApprovalRequest`` decided on the desk or the approvals API,
  where the requester never approves and a compensation's askers are barred (``approvals``); the adapter calls
  carry no saga id, so no compensation is asked through them.
- The user, tenant and secrets of each adapter call come from ``governed_tools(user=, tenant=)`` through
  ``caller_principal`` (membership checked); the SDK run context reaches toolhub only as the run key (which
  derives call ids, and ``own_call`` refuses one taken by another user, tenant or tool), never as a ``ToolContext``.
  A resume given tools bound to another of the user's tenants is refused (``own_call``), not joined.
- An ``AdapterError`` raised inside an SDK tool is raised by the SDK to the developer (``UserError``), never
  written to the model; the model reads only ``governed_call_result`` (the call's sanitized text or toolhub's
  bounded "waiting" lines).
- Every adapter call is a ``direct_call_request`` (the pipeline's audit events, client ``openai-agents``); pause and
  resume add ``openai_agents.paused``/``openai_agents.resumed`` to each call's chain, by the run's user.
- The admin's paused runs are read-only and per tenant (``TenantScopedAdmin``, ``GuardedLookups``: ``?state__...``
  and ``?call_ids__...`` JSON lookups are 400, so is a pattern such as
  ``?run_key__startswith=``; ``?o=`` on an unindexed column is skipped); the stored conversation is not shown.
- Left (noted): the langgraph adapter files its calls as kind ``api`` and the SDK adapter as ``call``; both are
  direct calls through the same pipeline, so nothing of the boundary depends on it.
"""

import json
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from tests.interop.openai_agents.test_openai_agents_adapter import NO_TRACING, agent_for, run
from tests.tenancy.conftest import make_user
from tests.unit.fake_openai import FakeModel, completion, serve
from toolhub.adapters.openai_agents import resume_governed, run_governed
from toolhub.adapters.openai_agents.models import PausedAgentRun
from toolhub.adapters.openai_agents.store import AdapterError
from toolhub.admin_indexes import sorts_on_index
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall

pytestmark = pytest.mark.django_db

URL = "/admin/openai_agents_adapter/pausedagentrun/"


@pytest.fixture
def acme_staff(tenant: Tenant) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(
        make_user("acme-staff", tenant=tenant, staff=True, permissions=("openai_agents_adapter.view_pausedagentrun",))
    )
    return client


@pytest.fixture
def paused(alice: User) -> PausedAgentRun:
    return PausedAgentRun.objects.create(
        run_key="sdk-run-key-1",
        tenant="acme",
        user=alice,
        agent_name="purchasing clerk",
        state={"conversation": "order the blue widgets"},
    )


def test_paused_runs_search_sends_no_like_scan(acme_staff: Client, paused: PausedAgentRun) -> None:
    """Found: ``?q=`` on the paused runs list was ``icontains`` over ``agent_name`` and ``run_key`` (a LIKE scan).

    Expect: the page answers and no statement it sends compares with LIKE.
    """
    with CaptureQueriesContext(connection) as queries:
        assert acme_staff.get(f"{URL}?q=clerk").status_code == 200
    assert not [q["sql"] for q in queries if " LIKE " in q["sql"].upper()]


def test_paused_runs_search_still_finds_a_run_exactly(acme_staff: Client, paused: PausedAgentRun) -> None:
    """Found: (with the LIKE search) a word of the agent's name matched. Expect: an exact id, key, tenant or user."""
    for term in (str(paused.pk), "sdk-run-key-1", "acme", "alice"):
        assert str(paused.pk) in acme_staff.get(f"{URL}?q={term}").content.decode(), term
    for term in ("clerk", "sdk-run"):
        assert str(paused.pk) not in acme_staff.get(f"{URL}?q={term}").content.decode(), term


def test_paused_runs_list_sorts_on_an_index_and_reads_no_stored_state(
    acme_staff: Client, paused: PausedAgentRun
) -> None:
    """Found: the list's default order (``-created_at``) was on no index, and the list fetched each row's ``state``.

    Expect: the default order and the created column sort on an index; no statement of the list reads ``state``.
    """
    assert all(sorts_on_index(PausedAgentRun, order) for order in PausedAgentRun._meta.ordering)
    with CaptureQueriesContext(connection) as queries:
        page = acme_staff.get(URL)
    assert page.status_code == 200 and str(paused.pk) in page.content.decode()
    assert not [q["sql"] for q in queries if '"state"' in q["sql"]]
    assert 'href="?o=5"' in page.content.decode()  # the created column's header sorts (on its index)


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


@pytest.mark.django_db(transaction=True)
def test_a_failed_resume_giving_the_run_back_is_in_each_calls_trail(
    fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    """Found: a failed resume's release (``resumed`` back to ``paused``) wrote no event: the trail read "resumed"
    twice for one run that went on once. Expect: resumed, released (by alice), resumed, in the call's chain.
    """
    arguments = json.dumps({"note": "once"})
    fake.queue(completion(tool_calls=[{"id": "call_1", "name": "risky_effect", "arguments": arguments}]))
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "go", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None
    operator_client.post(f"/api/v1/approvals/{ApprovalRequest.objects.get().pk}/approve/", {}, format="json")
    with pytest.raises(Exception, match="no reply queued"):
        run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))
    fake.queue(completion(content="Finally."))
    assert run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING)).final_output == "Finally."

    events = AuditEvent.objects.filter(call_id=ToolCall.objects.get().pk, event_type__startswith="openai_agents.")
    assert list(events.order_by("seq").values_list("event_type", "actor")) == [
        ("openai_agents.paused", "user:alice"),
        ("openai_agents.resumed", "user:alice"),
        ("openai_agents.released", "user:alice"),
        ("openai_agents.resumed", "user:alice"),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_run_refused_for_a_foreign_interruption_leaves_no_call_held(fake: FakeModel, alice: User) -> None:
    """Found: a run that paused on a toolhub call and on an SDK-only tool was refused and not stored, its toolhub
    call left pending on the desk (an approval would run it for a run nobody resumes).
    Expect: the refusal withdraws the held call (cancelled, its request too); nothing ran.
    """
    from agents import function_tool

    @function_tool(needs_approval=True)
    def outside(note: str) -> str:
        """A tool of the SDK's own, not toolhub's."""
        return note

    calls = [
        {"id": "call_1", "name": "risky_effect", "arguments": json.dumps({"note": "held"})},
        {"id": "call_2", "name": "outside", "arguments": json.dumps({"note": "mine"})},
    ]
    fake.queue(completion(tool_calls=calls))
    agent = agent_for(fake, alice, "risky_effect")
    agent.tools.append(outside)

    with pytest.raises(AdapterError, match="Only toolhub tools can pause a governed run"):
        run(run_governed(agent, "go", user=alice, run_config=NO_TRACING))

    call = ToolCall.objects.get()
    assert call.status == CallStatus.CANCELLED
    assert ApprovalRequest.objects.get(call=call).status == "cancelled"
    assert not PausedAgentRun.objects.exists()
