"""Review of 2026-12-06 (dk): review of review dd (a server's pattern budget, the bounded error list): the remote
tools an operator could not see.

Each test fails on the reviewed code (main at f8edb5e) and states what was found and what is expected.

Findings:

1. An accepted remote tool the registry leaves out (its server's pattern budget spent, a schema the registry
   refuses) was named in the server log only: the admin showed it accepted, and a call found no such tool. The
   registry now records why on the tool (``RemoteMcpTool.unusable_reason``, shown in its admin list and change
   page), audited when it becomes unusable and when usable again; the reason names no schema value. Accepting
   such a tool in the admin records it at once and warns the operator on the page ("accepted but not offered").
2. A server's tools were probed against its shared budget in name order: accepting a tool named ``aaa`` pushed
   a tool accepted long before past the budget, and it silently disappeared. The tools accepted first now keep
   theirs (ordered by ``accepted_at``, then name): the tool accepted last is the one left out, and finding 1
   shows the operator why.
3. The bounded error list (``MAX_REPORTED_ERRORS``) took the first problems by location: 100 bad items of one
   array hid a different problem of another field behind "... and 80 more" (the model fixed the items, resent,
   then learnt of the other). ``schema_problems`` now reports each field's problems in turn (one of each field
   before a second of any), so a different problem is listed while there is room.

Checked and holding:

- The shared budget is deterministic across processes: it is read from the database in one order (no set or
  dict order, no per-process state but the pattern weights, which are the same everywhere).
- ``validation_budget`` is a ``ContextVar``: checks run in threads at the same time each get their own budget; a
  spent one in one thread does not refuse the other's (test below).
- Processes that build the registry from the same stale read record (and audit) a reason once: the write is
  conditional on the value read (test below).
- A re-accepted tool (a quarantined tool's new definition) takes its place at the end of its server's budget
  order: it may be the one left out afterwards, which the operator now sees on the page and in the list.
- The remote tools' admin is cross-tenant only (``CrossTenantOnly``): tenant staff see neither the tools nor the
  reason; the reason is recorded from the accepted definition, which is kept without the credential.
"""

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from pydantic import ValidationError

from tests.security_review.test_review_2026_12_06_dd import _patterned_definition
from toolhub.admin_marks import marks_field, row_mark
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.models import RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.provider import _load
from toolhub.mcp_client.services import remote_tool_accept
from toolhub.models import AuditEvent
from toolhub.tools.definition import Tool
from toolhub.tools.jsonschema_args import validate_against_schema


def _accepted(server: RemoteMcpServer, definition: dict[str, Any], *, days_ago: int = 0) -> RemoteMcpTool:
    digest = definition_hash(definition)
    return RemoteMcpTool.objects.create(
        server=server,
        remote_name=definition["name"],
        tool_name=f"{server.name}__{definition['name']}",
        accepted_definition=definition,
        accepted_hash=digest,
        accepted_at=timezone.now() - timedelta(days=days_ago),
        current_definition=definition,
        current_hash=digest,
        status="active",
    )


@pytest.mark.django_db
def test_an_accepted_tool_the_registry_leaves_out_is_shown_unusable_and_audited() -> None:
    """Found: an accepted tool whose schema the registry refuses was left out with a log line only: the admin
    showed it "Accepted", a call answered "unknown tool", nothing was in the trail.

    Expect: the tool's row says why it is unusable (no schema value in it), its admin list and change page show it,
    the change is audited once; accepting a definition that builds clears it (audited too).
    """
    server = RemoteMcpServer.objects.create(name="crm", url="http://127.0.0.1:9/mcp", risk="low")
    refused = {
        "name": "lookup",
        "description": "Look up.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "pattern": "(?<=SECRETVALUE)x"}}},
    }
    row = _accepted(server, refused)

    assert "crm__lookup" not in _load()
    assert "crm__lookup" not in _load()  # a second process's load records nothing new
    row.refresh_from_db()
    assert row.unusable_reason, "no reason recorded"
    assert "SECRETVALUE" not in row.unusable_reason and "(?<=" not in row.unusable_reason
    events = AuditEvent.objects.filter(event_type="remote_mcp.tool_unusable", tool_name="crm__lookup")
    assert events.count() == 1 and "SECRETVALUE" not in str(events.get().payload)

    root = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    listing = client.get(reverse("admin:toolhub_remotemcptool_changelist")).content.decode()
    page = client.get(reverse("admin:toolhub_remotemcptool_change", args=[row.pk])).content.decode()
    shown = escape(row.unusable_reason)
    assert shown in listing and shown in page

    fixed = {**refused, "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    RemoteMcpTool.objects.filter(pk=row.pk).update(current_definition=fixed, current_hash=definition_hash(fixed))
    remote_tool_accept(row=row, actor="operator:root")
    assert "crm__lookup" in _load()
    row.refresh_from_db()
    assert row.unusable_reason == ""
    assert AuditEvent.objects.filter(event_type="remote_mcp.tool_usable", tool_name="crm__lookup").count() == 1


@pytest.mark.django_db
def test_processes_recording_the_same_reason_from_a_stale_read_audit_it_once() -> None:
    """Holding (the fix above): two processes that read the row before either recorded write and audit once."""
    from toolhub.mcp_client.usability import record_usability

    server = RemoteMcpServer.objects.create(name="crm", url="http://127.0.0.1:9/mcp", risk="low")
    row = _accepted(server, {"name": "lookup", "description": "Look up.", "inputSchema": {"type": "object"}})
    first, second = (
        list(RemoteMcpTool.objects.select_related("server")),
        list(RemoteMcpTool.objects.select_related("server")),
    )
    record_usability(first, {row.pk: "Not offered: why."})
    record_usability(second, {row.pk: "Not offered: why."})
    assert RemoteMcpTool.objects.get(pk=row.pk).unusable_reason == "Not offered: why."
    assert AuditEvent.objects.filter(event_type="remote_mcp.tool_unusable").count() == 1


@pytest.mark.django_db
def test_accepting_a_tool_the_registry_refuses_says_so_at_once() -> None:
    """Found: accepting a definition the registry cannot build answered "Accepted crm__lookup." and nothing else:
    the operator learnt it was not offered only when a call found no such tool (or from the server log).

    Expect: the acceptance records why at once (the row's reason, the trail) and warns the operator on the page.
    """
    server = RemoteMcpServer.objects.create(name="crm", url="http://127.0.0.1:9/mcp", risk="low")
    offered = {
        "name": "lookup",
        "description": "Look up.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "pattern": "(?<=SECRETVALUE)x"}}},
    }
    row = RemoteMcpTool.objects.create(
        server=server,
        remote_name="lookup",
        tool_name="crm__lookup",
        current_definition=offered,
        current_hash=definition_hash(offered),
    )
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    chosen = {"action": "accept_offered", "_selected_action": [row.pk]}
    reviewed = marks_field([row_mark(row.pk, row.current_hash)])
    page = client.post(
        reverse("admin:toolhub_remotemcptool_changelist"), {**chosen, **reviewed, "apply": "1", "confirm": "on"}
    )
    row.refresh_from_db()
    assert row.status == "active" and row.unusable_reason
    shown = [str(message) for message in get_messages(page.wsgi_request)]
    assert any("crm__lookup" in message and row.unusable_reason in message for message in shown), shown
    assert AuditEvent.objects.filter(event_type="remote_mcp.tool_unusable", tool_name="crm__lookup").count() == 1


@pytest.mark.django_db
def test_a_tool_accepted_later_does_not_push_an_earlier_one_out(caplog: pytest.LogCaptureFixture) -> None:
    """Found: a server's tools shared its pattern budget in name order: accepting ``aaa`` (48 patterns) pushed
    ``zzz``, accepted days before and in use, past the budget; it disappeared from the registry with a log line.

    Expect: the tools accepted first keep their budget: ``zzz`` stays, the newly accepted ``aaa`` is left out and
    its row says the server's pattern budget is spent.
    """
    server = RemoteMcpServer.objects.create(name="big", url="http://127.0.0.1:9/mcp", risk="low")
    for name, days in (("zzz", 3), ("mmm", 2)):
        _accepted(server, _patterned_definition(name, 48), days_ago=days)
    assert {"big__zzz", "big__mmm"} <= set(_load())

    newcomer = _patterned_definition("aaa", 48)
    row = RemoteMcpTool.objects.create(
        server=server,
        remote_name="aaa",
        tool_name="big__aaa",
        current_definition=newcomer,
        current_hash=definition_hash(newcomer),
    )
    remote_tool_accept(row=row, actor="operator:root")
    with caplog.at_level(logging.WARNING, logger="toolhub.mcp_client.provider"):
        entries = _load()

    assert {"big__zzz", "big__mmm"} <= set(entries), sorted(entries)
    assert "big__aaa" not in entries
    row.refresh_from_db()
    assert "budget" in row.unusable_reason, row.unusable_reason
    assert RemoteMcpTool.objects.get(tool_name="big__zzz").unusable_reason == ""


def test_a_different_problem_is_not_hidden_behind_many_alike() -> None:
    """Found: 100 items of the wrong type in ``xs`` filled the ``MAX_REPORTED_ERRORS`` lines; ``zz`` (a number
    where a string belongs) was one of the "80 more problems not listed": the model fixed ``xs``, resent, and
    only then learnt of ``zz``.

    Expect: ``zz``'s problem is listed beside ``xs``'s (each field's problems in turn), the list still bounded.
    """
    from toolhub.tools.jsonschema_args import MAX_REPORTED_ERRORS

    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}}, "zz": {"type": "string"}},
    }
    with pytest.raises(ValidationError) as raised:
        validate_against_schema("mixed", schema, {"xs": ["x"] * 100, "zz": 5})
    errors = raised.value.errors()
    assert len(errors) <= MAX_REPORTED_ERRORS + 1, len(errors)
    assert any(error["loc"] == ("zz",) for error in errors), [error["loc"] for error in errors]
    assert any(error["loc"] == ("xs", 0) for error in errors)


def test_budgeted_checks_in_threads_each_have_their_own_budget() -> None:
    """Holding: a check spending its budget in one thread does not refuse a small check running in another."""
    defs: dict[str, Any] = {
        f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(10)
    }
    defs["a10"] = {"type": "integer", "minimum": 0}
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"$ref": "#/$defs/a0"}}}}
    tool = Tool.create("fanned_dk", "Fanned.", {**schema, "$defs": defs}, lambda a: a)

    def big() -> str:
        with pytest.raises(ValidationError) as raised:
            tool.validate_arguments({"xs": list(range(1000))})
        return str(raised.value)

    def small() -> Any:
        return [tool.validate_arguments({"xs": [1, 2, 3]}) for _ in range(20)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        spent = [pool.submit(big) for _ in range(2)]
        kept = [pool.submit(small) for _ in range(2)]
        assert all("send fewer items" in future.result() for future in spent)
        assert all(result == [{"xs": [1, 2, 3]}] * 20 for result in (future.result() for future in kept))
