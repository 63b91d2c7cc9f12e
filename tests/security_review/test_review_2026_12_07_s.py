"""Review 2026-12-07 (s): every other reader of a tool's schema that one unbuildable dynamic tool could break.

Each finding's test fails on the code as found (main at 66111ef) and says what was found and what is expected.

Findings:

1. ``tool_search`` (a run's) and MCP's ``toolhub_find_tools`` named a tool whose schema cannot be built: the
   search index (``disclosure.search.searchable_names``) was built over it (its document reads
   ``known_json_schema``), so a hit sent the model to a tool no listing ever gives it and whose calls are refused,
   and it took one of the search's ``max_results`` places from a tool the caller could use. ``searchable_names``
   now keeps only ``export.listable_names`` (the broken one left out, reported once with E001 and a hint), as
   ``tools/list`` and the run's tool list do.
   ``test_tool_search_and_mcp_find_tools_name_no_unbuildable_tool``
2. A facade's unfold (``UnfoldingTool._unfold``) answered "These tools are available from your next turn" naming an
   unbuildable child, while its context tool and the next turn's definitions left it out. ``usable_in_call`` (what
   any navigation tool's answer may name: an unfold, an agentic tool's guide or refusal) now ends with
   ``listable_names``; ``feedback``'s suggestions read the same helper (it was ``feedback._listable``). MCP's
   ``toolhub_describe_tool`` of a facade and ``toolhub_find_tools``' groups listed the child among the group's tools
   (``mcp_discovery._group``); the group now keeps ``listable_names`` too.
   ``test_a_facades_unfold_names_no_unbuildable_child``
3. The catalogue sync (``catalogue.tool_catalogue_sync``: ``post_migrate`` and ``manage.py sync_tools``, reached
   with ``--skip-checks``) read every code tool's ``version``/``json_schema`` unguarded: one unbuildable tool raised
   ``ToolDefinitionError`` and rolled the whole sync back, so no other tool's row was created or updated. The sync
   now skips it (``export.listable``: reported once, E001 and a hint), keeps its existing row as it was (not marked
   removed) and syncs the others.
   ``test_one_unbuildable_tool_leaves_the_catalogue_sync_to_the_others``

Checked and holding:

- A run suspended on an approval, whose agent holds a dynamic tool that becomes unbuildable meanwhile, resumes when
  the other call is approved: the next turn sends the others (``visible_tool_definitions``: ``buildable``), the run
  completes. ``test_a_suspended_run_resumes_when_one_of_its_tools_became_unbuildable``
- A run held on a call of the very tool that became unbuildable (approving is refused, review d) resumes when the call
  is rejected: the model is told, its next call runs, the run completes, the tool never ran.
  ``test_a_run_held_on_a_call_of_a_tool_that_became_unbuildable_resumes_when_it_is_rejected``
- A saga rolled back after a step's compensation tool became unbuildable: that compensation fails INVALID in bounded
  words (nothing executed), the saga needs attention, the other step is still undone (``sagas.mapping`` reads the
  compensation's ``parameters`` and ``declared_names``, never its schema).
  ``test_a_rollback_whose_compensation_became_unbuildable_still_undoes_the_other_steps``
- An agent's ``tool_choice`` naming the broken tool sends no ``tool_choice`` (``OpenAIChatAdapter._tool_choice_for``
  names a tool only when it is among the definitions sent), so the provider is never asked for a tool it lacks.
- System checks (``run_checks``, as ``migrate`` runs them) report E001 for the tool and crash nowhere (approvals'
  W001 reads ``listed_schema`` since review d; ``sagas.checks`` reads compensations only); the OpenAPI schema
  (drf-spectacular documents no tool's schema) answers 200; the admin's agent list and change page, the run page,
  the tool groups (a group naming it), tool definitions and grants pages answer 200.
  ``test_checks_openapi_and_admin_pages_hold_with_one_unbuildable_tool``
- A model's call of the unbuildable tool in a run is refused INVALID in its own words ("cannot validate its
  arguments", pinned by reviews fm/ft; the worker's refusal is ``unbuildable_problem``'s, review l) and the run's
  next call of another tool succeeds (shown in finding 1's run).
- ``reset_equipped_tools`` reads group names only (``equippable_groups``); the equipped tools' definitions go
  through ``buildable``. Subagents' child runs take their tool list from the same loop (``visible_tool_definitions``).
- ``search_eval`` reads a labeled catalogue file (``search.evaluation``), never the registry; the search documents
  read ``known_json_schema``. ``selectors.withheld_names`` reads ``version`` only once the schema is known.
- MCP ``tools/list``, ``toolhub_describe_tool``, the header scan (``mcp_headers``) and the adapters' listing were
  guarded by reviews ge and d; ``tools/call`` of another tool reads only that tool's schema.
"""

import logging
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import Client
from pydantic import Field

from agents_app.models import RunStatus
from agents_app.services import agent_create
from approvals.models import ApprovalRequest
from approvals.services import approval_approve, approval_reject
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.sagas.sample_tools import LOG
from tests.sagas.sample_tools import TOOLS as SAGA_TOOLS
from tests.sagas.test_services import _call as _saga_call
from tests.sagas.test_services import _compensations
from tests.security_review.test_review_2026_12_06_ge import _INTERNALS, _assert_reported_to_operators, _unbuildable
from toolhub.catalogue import tool_catalogue_sync
from toolhub.direct import caller_principal
from toolhub.disclosure import UnfoldingTool
from toolhub.mcp_discovery import describe_tool, find_tools
from toolhub.models import CallStatus, ToolCall, ToolDefinition, ToolGroup
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


def _result_of(run_id: Any, tool_name: str) -> Any:
    return ToolCall.objects.get(run_id=run_id, tool_name=tool_name).result


def test_tool_search_and_mcp_find_tools_name_no_unbuildable_tool(
    alice: User,
    start_run: Any,  # noqa: F811 - the imported fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: ``tool_search`` and MCP's ``toolhub_find_tools`` answered the name of a tool whose schema cannot be
    built (the index was built over it): the model was sent to a tool it is never given, whose calls are refused,
    and the hit took a place from a tool it could use.

    Expect: neither names it; the search's one place goes to a tool the caller may use; it is reported to operators.
    """
    broken = _unbuildable("s_described_effect")
    query = "cannot be described effect"
    script = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": query, "max_results": 1}}]},
        {"tool_calls": [{"name": "record_effect", "arguments": {"note": "x"}}]},
        {"content": "done"},
    ]
    with registry.temporarily(broken), caplog.at_level(logging.WARNING):
        agent = agent_create(
            name="s-search",
            provider="scripted",
            tools=["record_effect", broken.name],
            tenant="acme",
            script=script,
            tool_search=True,
        )
        run = start_run(agent, alice, context={"tenant": "acme"})
        found = find_tools(caller_principal(alice), {"query": query, "max_results": 1})
    assert run.status == RunStatus.COMPLETED, run.error
    assert _result_of(run.pk, "tool_search")["tools"] == ["record_effect"]
    assert ToolCall.objects.get(run_id=run.pk, tool_name="record_effect").status == CallStatus.SUCCEEDED
    assert not found.is_error
    hits = [tool["name"] for tool in (found.structured_content or {})["tools"]]
    assert len(hits) == 1 and broken.name not in hits
    _assert_reported_to_operators(caplog, broken.name)


def test_a_facades_unfold_names_no_unbuildable_child(
    alice: User,
    start_run: Any,  # noqa: F811 - the imported fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: a facade's unfold told the model "these tools are available from your next turn" naming a child whose
    schema cannot be built, which its context tool and the next turn's definitions leave out; MCP's
    ``toolhub_describe_tool`` of the facade (and ``toolhub_find_tools``' groups) listed it among the group's tools,
    which ``tools/list`` and describing it leave out.

    Expect: the unfold and the MCP group name the other children only, as the context tool does.
    """
    broken = _unbuildable("s_facade_child")
    facade = UnfoldingTool.of("s_facade", "Effects.", [broken, registry.get("record_effect")])
    script = [
        {"tool_calls": [{"name": "s_facade", "arguments": {}}]},
        {"tool_calls": [{"name": "s_facade_context", "arguments": {}}]},
        {"content": "done"},
    ]
    with registry.temporarily(facade.facade, facade.context_tool, broken), caplog.at_level(logging.WARNING):
        agent = agent_create(name="s-facade", provider="scripted", tools=["s_facade"], tenant="acme", script=script)
        run = start_run(agent, alice, context={"tenant": "acme"})
        group = describe_tool(caller_principal(alice), {"name": "s_facade"})
    assert run.status == RunStatus.COMPLETED, run.error
    assert not group.is_error and (group.structured_content or {})["group"]["tools"] == ["record_effect"]
    unfolded = [tool["name"] for tool in _result_of(run.pk, "s_facade")["tools"]]
    described = [tool["name"] for tool in _result_of(run.pk, "s_facade_context")["tools"]]
    assert unfolded == described == ["record_effect"]
    _assert_reported_to_operators(caplog, broken.name)


def test_one_unbuildable_tool_leaves_the_catalogue_sync_to_the_others(caplog: pytest.LogCaptureFixture) -> None:
    """Found: the catalogue sync (``post_migrate``, ``sync_tools``; reached with ``--skip-checks``) raised
    ``ToolDefinitionError`` for one code tool whose schema cannot be built and rolled back: no other tool was synced.

    Expect: the others synced; the broken tool's row kept as it was (not marked removed); reported to operators.
    """
    ToolDefinition.objects.filter(name="record_effect").update(description="stale", version="old")
    kept = ToolDefinition.objects.create(name="s_sync", description="before", version="v1", present_in_code=True)
    added = Tool.create("s_sync_added", "Added with it.", {"note": (str, "")}, lambda note: None)
    with registry.temporarily(_unbuildable("s_sync"), added), caplog.at_level(logging.WARNING):
        counts = tool_catalogue_sync()
    assert counts["created"] >= 1 and counts["updated"] >= 1 and counts["removed"] == 0
    assert ToolDefinition.objects.get(name="record_effect").description != "stale"
    assert ToolDefinition.objects.filter(name="s_sync_added", present_in_code=True).exists()
    row = ToolDefinition.objects.get(pk=kept.pk)
    assert (row.description, row.version, row.present_in_code) == ("before", "v1", True)
    _assert_reported_to_operators(caplog, "s_sync")


def test_a_suspended_run_resumes_when_one_of_its_tools_became_unbuildable(
    alice: User,
    acme_operator: User,
    start_run: Any,  # noqa: F811 - the imported fixture
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Holding: a run suspended on an approval, whose agent's dynamic tool becomes unbuildable while it waits,
    resumes once the held call is approved: the next turn sends the others, the run completes, the model is told
    nothing of the broken tool.
    """
    dynamic = Tool.create("s_later_broken", "Works for now.", {"note": (str, "")}, lambda note: None)
    script = [
        {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
        {"tool_calls": [{"name": "record_effect", "arguments": {"note": "after"}}]},
        {"content": "done"},
    ]
    with registry.temporarily(dynamic):
        agent = agent_create(
            name="s-resume",
            provider="scripted",
            tools=["risky_effect", "record_effect", dynamic.name],
            tenant="acme",
            script=script,
        )
        run = start_run(agent, alice, context={"tenant": "acme"})
        assert run.status == RunStatus.WAITING, (run.status, run.error)
        monkeypatch.setitem(registry._tools, dynamic.name, _unbuildable(dynamic.name))
        held = ApprovalRequest.objects.get(call__run_id=run.pk)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=held.pk, user=acme_operator)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error)
    assert ToolCall.objects.get(run_id=run.pk, tool_name="record_effect").status == CallStatus.SUCCEEDED
    assert dynamic.name not in str(run.messages)


def test_checks_openapi_and_admin_pages_hold_with_one_unbuildable_tool(
    alice: User,
    start_run: Any,  # noqa: F811 - the imported fixture
    admin_client: Client,
) -> None:
    """Holding: with one unbuildable tool registered, the system checks report it (E001) and crash nowhere; the
    OpenAPI schema, the agent pages, its run's page, the tool groups (one naming it), tool definitions and grants
    pages answer 200.
    """
    broken = _unbuildable("s_pages")
    script = [{"tool_calls": [{"name": "record_effect", "arguments": {"note": "x"}}]}, {"content": "done"}]
    with registry.temporarily(broken):
        problems = run_checks(databases=["default"])
        group = ToolGroup.objects.create(name="s-group", extra_tools=[broken.name])
        agent = agent_create(
            name="s-pages", provider="scripted", tools=["record_effect", broken.name], tenant="acme", script=script
        )
        run = start_run(agent, alice, context={"tenant": "acme"})
        pages = [
            "/api/schema/",
            "/admin/agents_app/agent/",
            f"/admin/agents_app/agent/{agent.pk}/change/",
            f"/admin/agents_app/agentrun/{run.pk}/change/",
            "/admin/toolhub/toolgroup/",
            f"/admin/toolhub/toolgroup/{group.pk}/change/",
            "/admin/toolhub/tooldefinition/",
            "/admin/toolhub/grant/add/",
        ]
        statuses = {page: admin_client.get(page).status_code for page in pages}
    assert [problem.obj for problem in problems if problem.id == "toolhub.E001"] == [broken.name]
    assert run.status == RunStatus.COMPLETED, run.error
    assert statuses == dict.fromkeys(pages, 200)


def test_a_run_held_on_a_call_of_a_tool_that_became_unbuildable_resumes_when_it_is_rejected(
    alice: User,
    acme_operator: User,
    start_run: Any,  # noqa: F811 - the imported fixture
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Holding: a run suspended on an approval of a call whose dynamic tool becomes unbuildable meanwhile (approving
    it is refused, review d) resumes once the call is rejected: the model is told, its next call of another tool
    runs, the run completes; nothing of the broken tool's builder reaches it.
    """
    ran: list[str] = []
    dynamic = Tool.create(
        "s_held_broken", "Held for an operator.", {"note": (str, "")}, ran.append, needs_approval=True
    )
    script = [
        {"tool_calls": [{"name": dynamic.name, "arguments": {"note": "held"}}]},
        {"tool_calls": [{"name": "record_effect", "arguments": {"note": "after"}}]},
        {"content": "done"},
    ]
    with registry.temporarily(dynamic):
        agent = agent_create(
            name="s-held", provider="scripted", tools=["record_effect", dynamic.name], tenant="acme", script=script
        )
        run = start_run(agent, alice, context={"tenant": "acme"})
        assert run.status == RunStatus.WAITING, (run.status, run.error)
        monkeypatch.setitem(registry._tools, dynamic.name, _unbuildable(dynamic.name))
        held = ApprovalRequest.objects.get(call__run_id=run.pk)
        with django_capture_on_commit_callbacks(execute=True):
            approval_reject(request_id=held.pk, user=acme_operator, comment="tool broken")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error)
    assert ToolCall.objects.get(run_id=run.pk, tool_name=dynamic.name).status == CallStatus.REJECTED
    assert ToolCall.objects.get(run_id=run.pk, tool_name="record_effect").status == CallStatus.SUCCEEDED
    assert ran == [] and not [word for word in _INTERNALS if word in str(run.messages)]


@pytest.mark.django_db(transaction=True)  # a saga's rollback runs its compensations after commit
def test_a_rollback_whose_compensation_became_unbuildable_still_undoes_the_other_steps(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Holding: a saga rolled back after one step's compensation tool was registered again with a definition whose
    schema cannot be built: that compensation fails in bounded words (nothing executed; the builder's message only
    in the log), the saga needs attention, and the other step is still undone.
    """
    LOG.clear()
    with registry.temporarily(*SAGA_TOOLS):
        _saga_call("reserve", {"item": "a"}, saga="s-broken", user=alice)
        _saga_call("book", {"item": "b"}, saga="s-broken", user=alice)
        broken = Tool.create(
            "cancel_booking",
            "Cannot be described.",
            {"booking_id": (Annotated[str, Field(pattern=r"^a+(?=b)")], "")},
            lambda booking_id: None,
            idempotent=True,
        )
        monkeypatch.setitem(registry._tools, "cancel_booking", broken)
        failed = _saga_call("explode", {"reason": "boom"}, saga="s-broken", user=alice)
    assert failed.status == CallStatus.FAILED
    by_step = {compensation.step_tool: compensation for compensation in _compensations("s-broken")}
    assert by_step["reserve"].status == CompensationStatus.SUCCEEDED and ("release", "a") in LOG
    refused = by_step["book"]
    assert refused.status == CompensationStatus.FAILED and refused.call is not None
    assert refused.call.status == CallStatus.INVALID and "nothing was executed" in refused.last_error
    assert not [word for word in _INTERNALS if word in refused.last_error]
    assert ("cancel", "B-b") not in LOG
    assert Saga.objects.get(key="s-broken").status == SagaStatus.NEEDS_ATTENTION
