"""Review 2026-12-07 (d): the schema readers review ge's ``buildable`` did not guard yet.

Each finding's test fails on the code as found (main at 8711560) and says what was found and what is expected.

Findings:

1. The framework adapters' one listing (``adapters._common.offered_tools``, which Pydantic AI's toolset, LangGraph's
   ``tools()`` and the OpenAI Agents SDK's ``governed_tools`` all use) read each offered tool's ``json_schema``
   unguarded: one granted tool whose schema cannot be built raised ``ToolDefinitionError`` for every user, so no
   adapter-built agent got any tool. ``offered_tools`` now returns ``export.listable(...)`` (``buildable``: the
   broken one left out, reported once with E001 and a hint).
   ``test_one_unbuildable_tool_leaves_the_others_to_every_framework_adapter``
2. An approval rule covering every tool (or a group) with an argument was checked against each tool's
   ``json_schema`` (``references.parameter_schema`` and the hint's names in ``approvals.rule_checks``): one
   unbuildable tool made ``ApprovalRule.clean`` raise (the admin's rule forms answered 500), the rules' list (its
   problems column) fail and ``manage.py check --database default`` (approvals.W001, run by ``migrate``) crash.
   ``parameter_schema`` and the new ``references.parameter_names`` (also read by ``approvals.rules``' matching) read
   ``export.listed_schema`` (``buildable`` for one tool: ``None``, reported once).
   ``test_one_unbuildable_tool_leaves_approval_rules_checkable``
3. A rule naming such a tool with an argument raised ``ToolDefinitionError`` in ``clean`` (500). Now refused at its
   argument with ``feedback.unbuildable_tool_message`` (tool, ``toolhub.E001``, a hint; no builder internals).
   ``test_a_rule_naming_an_unbuildable_tool_is_refused_in_bounded_words``
4. A held call whose (dynamic) tool was registered again with a broken definition: its approval page and any bulk
   decision page listing it answered 500 (``ApproveForm`` and ``shown_fields_version`` read ``json_schema`` and
   ``version``), so one such request blocked bulk approval of every request selected with it. The form makes no
   fields (``listed_schema`` is ``None``), its ``fields_version`` is "" (as for a tool no longer registered), the
   page shows ``approvals.forms.unbuildable_problem`` as the decision's warning, and ``approval_approve`` refuses
   with it (``DecisionNotAllowedError``: nothing recorded, nothing executed); rejecting stays open.
   ``test_a_request_whose_tool_became_unbuildable_leaves_the_others_decidable``

Checked and holding:

- ``mcp_headers.header_schemas_for`` reads only tools ``header_declaring_tools`` found declaring a header through
  ``known_json_schema`` (a built schema is cached on the ``Tool``), so it did not fail; it now reads
  ``listed_schema`` too, so a stale name (a registry change of the same size) cannot fail every MCP request.
- ``agentic.chaining`` reads ``json_schema`` when a chained type is defined (a definition-time error, as E001).
- ``catalogue.py`` syncs code tools only (kept from a deploy by E001, review gk); search documents,
  ``selectors.withheld_names`` and the console's exports read ``known_json_schema`` (reviews ft, ge).
- ``disclosure.unfolding``'s facade guidance, ``agents_app.loop``, ``agentic.inner``, ``mcp_server`` and
  ``mcp_discovery`` already go through ``buildable`` (review ge); ``feedback._listable`` now reads ``listable``.
- A call of an unbuildable tool is refused INVALID, nothing executed (review gk); ``approvals.rules`` reads the
  called tool's parameters only after its arguments validated.

Left: ``Tool.version`` reads ``json_schema``; a call approved before its tool became unbuildable reaches
``execution``'s version check in the worker (not shown here to fail other calls; not changed).
"""

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from approvals.checks import check_approval_rules
from approvals.models import ApprovalRequest, ApprovalRule
from approvals.services import approval_approve
from tests.helpers import RequestCall, console
from tests.security_review.test_review_2026_12_06_ge import _INTERNALS, _assert_reported_to_operators, _unbuildable
from toolhub.adapters._pydantic_ai_bridge import granted_tools
from toolhub.adapters.langgraph import LangGraphToolhub
from toolhub.adapters.openai_agents import governed_tools
from toolhub.direct import caller_principal
from toolhub.exceptions import ApprovalError
from toolhub.models import CallStatus
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


def test_one_unbuildable_tool_leaves_the_others_to_every_framework_adapter(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: the framework adapters' one listing (``offered_tools``: Pydantic AI's toolset, LangGraph's ``tools()``,
    the OpenAI Agents SDK's ``governed_tools``) read each offered tool's ``json_schema`` unguarded: one granted tool
    whose schema cannot be built raised ``ToolDefinitionError`` (pydantic's builder message) for every user, so no
    agent built on an adapter could get any tool.

    Expect: every other tool offered, the broken one left out and named to operators (E001, a hint), as in every
    other listing.
    """
    broken = _unbuildable("d_unbuildable_adapters")
    with registry.temporarily(broken), caplog.at_level(logging.WARNING):
        pydantic_ai = [tool.name for tool in granted_tools(caller_principal(alice))]
        langgraph = [tool.name for tool in LangGraphToolhub(user=alice).tools()]
        openai_agents = [tool.name for tool in governed_tools(user=alice)]
    for listed in (pydantic_ai, langgraph, openai_agents):
        assert "record_effect" in listed and broken.name not in listed
    assert pydantic_ai == langgraph == openai_agents
    _assert_reported_to_operators(caplog, broken.name)


def _global_rule(**fields: Any) -> ApprovalRule:
    return ApprovalRule(name="notes", enabled=True, argument="note", operator="==", value="x", **fields)


def test_one_unbuildable_tool_leaves_approval_rules_checkable(
    caplog: pytest.LogCaptureFixture, admin_client: Client
) -> None:
    """Found: an approval rule covering every tool (or a group) with an argument was checked against each covered
    tool's ``json_schema`` (``references.parameter_schema``, ``rule_checks``): one registered tool whose schema
    cannot be built made ``ApprovalRule.clean`` raise ``ToolDefinitionError`` (the admin's add and change forms
    answered 500 for every such rule of every tenant), the rules' list (its problems column) failed, and
    ``manage.py check --database default`` (approvals.W001, run by every ``migrate``) crashed.

    Expect: the rule checked against the tools whose schema builds (the broken one reported to operators);
    nothing raised; the list shows the rule.
    """
    broken = _unbuildable("d_unbuildable_rules")
    with registry.temporarily(broken), caplog.at_level(logging.WARNING):
        rule = _global_rule()
        rule.full_clean()  # ``note`` is record_effect's
        rule.save()
        assert check_approval_rules(databases=["default"]) == []
        listed = admin_client.get("/admin/approvals/approvalrule/")
    assert listed.status_code == 200
    assert "notes" in listed.content.decode()
    _assert_reported_to_operators(caplog, broken.name)


def test_a_rule_naming_an_unbuildable_tool_is_refused_in_bounded_words(admin_client: Client) -> None:
    """Found: a rule naming a tool whose schema cannot be built, with an argument, raised ``ToolDefinitionError`` in
    ``ApprovalRule.clean``: the admin's form answered 500.

    Expect: the rule refused at its argument with a bounded message naming the tool, the check's id and a hint; no
    builder internals.
    """
    broken = _unbuildable("d_unbuildable_named")
    with registry.temporarily(broken):
        rule = ApprovalRule(name="pins", enabled=True, tool_name=broken.name, argument="pin", operator="==", value="a")
        with pytest.raises(ValidationError) as refused:
            rule.full_clean()
    text = str(refused.value.message_dict["argument"])
    assert broken.name in text and "toolhub.E001" in text and "Hint:" in text and len(text) <= 600
    assert not [word for word in _INTERNALS if word in text]


def test_a_request_whose_tool_became_unbuildable_leaves_the_others_decidable(
    request_call: RequestCall, alice: User, acme_operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: once the tool of a held call could no longer be described (a dynamic tool registered again with a
    broken definition), its approval request's page and any bulk decision page listing it answered 500
    (``ApproveForm`` and ``fields_version`` read the tool's ``json_schema``/``version`` unguarded): one such request
    blocked the operators' bulk approval of every other request selected with it.

    Expect: the pages render; the broken request shows a bounded message (tool name, E001, hint) and approving it is
    refused with it, nothing executed; the other request is approved.
    """
    dynamic = Tool.create(
        "d_held", "Held for an operator.", {"note": (str, "")}, lambda note: None, needs_approval=True
    )
    with registry.temporarily(dynamic):
        held = request_call("d_held", {"note": "held"}, alice, tenant="acme")
        other = request_call("risky_effect", {"note": "other"}, alice, tenant="acme")
    assert held.status == other.status == CallStatus.PENDING_APPROVAL
    broken_request = ApprovalRequest.objects.get(call=held)
    other_request = ApprovalRequest.objects.get(call=other)
    # The dynamic tool registered again, its new definition broken (its schema cannot be built).
    monkeypatch.setitem(registry._tools, "d_held", _unbuildable("d_held"))
    client = console(acme_operator)

    page = client.get(f"/admin/approvals/approvalrequest/{broken_request.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "toolhub.E001" in text
    assert not [word for word in ("look-ahead", "look-around", "Traceback") if word in text]

    ids = [str(broken_request.pk), str(other_request.pk)]
    confirm = client.post("/admin/approvals/approvalrequest/", {"action": "approve_selected", "_selected_action": ids})
    assert confirm.status_code == 200
    assert f"#{other_request.pk}" in confirm.content.decode() or "2 request(s)" in confirm.content.decode()

    with pytest.raises(ApprovalError) as refused:
        approval_approve(request_id=broken_request.pk, user=acme_operator)
    assert "toolhub.E001" in str(refused.value) and "Hint:" in str(refused.value) and len(str(refused.value)) <= 600
    approval_approve(request_id=other_request.pk, user=acme_operator)
    held.refresh_from_db()
    other.refresh_from_db()
    assert held.status == CallStatus.PENDING_APPROVAL  # nothing recorded, nothing executed
    assert other.status != CallStatus.PENDING_APPROVAL
    assert not broken_request.decisions.exists()
