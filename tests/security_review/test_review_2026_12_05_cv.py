"""Review of 2026-12-05 (cv): the admin confirmation pages that still carried a hidden field per row.

Each test fails on the reviewed code (main at 6a11df1) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The approval desk's "Approve/Reject selected" confirmation carried two hidden fields per request
   (``arguments_hash_<id>``, ``fields_version_<id>``) and MCP's "Accept the definition offered now" one per tool
   (``reviewed_hash_<id>``), besides Django's ``_selected_action``: a page of a few hundred rows was refused by
   Django at the confirm (more than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields: a bare "Bad Request (400)"). Every
   confirmation page now carries what it showed of its rows in the one ``marks`` field (``toolhub.admin_marks``,
   the sagas' mechanism made shared: ``marks_field``/``page_marks`` for the sagas, ``row_mark``/``row_bindings``
   for per-row bindings).
2. "Approve selected" confirmed without the per-row fields (a script's own form, or a page cut short) approved
   every selected request unbound: an empty ``arguments_hash`` meant "the model's original arguments" and an empty
   ``fields_version`` "not sent". A request whose binding is missing, garbled or named twice is now refused and
   reported ("not listed on the page you confirmed"); the others are decided as before.
3. ``_selected_action`` is one field per row on every confirmation page: selecting more rows than one page can post
   back showed a page whose confirm was refused with a bare 400. The page is now not shown: the operator is told to
   select at most N (``rows_per_confirmation``: the field limit less the page's own fields), and nothing is done.

Checked and holding:

- The sagas' pages read the same field through the shared functions; their marks are still compared whole under
  the sagas' locks (tests/security_review/test_review_2026_12_05_bn.py, _cs.py).
- A mark holds no space and a row mark's parts no ``:`` (``marks_field``/``row_mark`` refuse to build one that
  would): ids, hex hashes, ``fields_version`` (16 hex), statuses and ISO times; an empty ``fields_version`` (a tool
  no longer registered) travels as an empty part and is read as before.
- MCP's accept with a garbled or missing binding was already refused by ``remote_tool_accept`` (an empty
  ``reviewed_hash`` never equals an offered hash); it is now refused with its own message before the service.
- "Reject selected" is bound to nothing, as before (a rejection runs nothing).
- The decisions rate (60 a minute) still counts each request decided from the list, after its binding is checked
  (tests/security_review/test_throttled_operations.py).
"""

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData, pending_copies
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.models import RemoteMcpServer, RemoteMcpTool

APPROVALS = "/admin/approvals/approvalrequest/"
REMOTE_TOOLS = "/admin/toolhub/remotemcptool/"

#: A field limit small enough that a page of ``ROWS`` rows with a field or two per row passes it.
LIMIT = 40
ROWS = 25


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=LIMIT)
def test_approve_selected_of_many_requests_can_be_confirmed(acme: AcmeData, acme_operator: User) -> None:
    """Found: "Approve selected" of 25 requests posted 75 fields at the confirm (a hash, a definition version and
    a ``_selected_action`` each): over the limit of 40, Django answered 400 and nothing was decided (with the
    default limit of 1,000: about 333 requests).

    Expect: the confirm is read and every listed request is approved, each bound to what the page showed.
    """
    pending = pending_copies(acme, ROWS, key="cv")
    client = console(acme_operator)
    confirmation = action_confirmation(client, APPROVALS, "approve_selected", [r.pk for r in pending])

    answer = client.post(APPROVALS, {**confirmation, "comment": "all fine"}, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert f"{ROWS} request(s) approved." in [str(m) for m in answer.context["messages"]]
    approved = ApprovalRequest.objects.filter(pk__in=[r.pk for r in pending], status=ApprovalStatus.APPROVED)
    assert approved.count() == ROWS


@pytest.mark.django_db(transaction=True)
def test_approve_selected_without_the_pages_bindings_approves_nothing(acme: AcmeData, acme_operator: User) -> None:
    """Found: confirming "Approve selected" without the page's per-row bindings (none, one garbled, one named
    twice) approved every selected request unbound, as if its arguments and its tool's definition were the ones
    shown.

    Expect: each request without one clear binding is reported as not listed and left pending; a request bound as
    the page showed it is approved.
    """
    first, second, third = pending_copies(acme, 3, key="cv")
    client = console(acme_operator)
    confirmation = action_confirmation(client, APPROVALS, "approve_selected", [first.pk, second.pk, third.pk])
    marks = {mark.split(":")[0]: mark for mark in confirmation["marks"].split()}
    garbled = f"{first.pk}:{first.arguments_hash}"  # one part missing
    twice = [f"{second.pk}:{second.arguments_hash}:", marks[str(second.pk)]]

    unbound = client.post(APPROVALS, {**confirmation, "marks": "", "comment": "fine"}, follow=True)
    bound = client.post(
        APPROVALS,
        {**confirmation, "marks": " ".join([garbled, *twice, marks[str(third.pk)]]), "comment": "fine"},
        follow=True,
    )

    said = [str(m) for m in unbound.context["messages"]]
    assert any("3 request(s) could not be approved" in m and "not listed on the page" in m for m in said), said
    said = [str(m) for m in bound.context["messages"]]
    assert "1 request(s) approved." in said, said
    assert any(f"#{first.pk} " in m and f"#{second.pk} " in m and "not listed on the page" in m for m in said), said
    statuses = dict(ApprovalRequest.objects.filter(pk__in=[first.pk, second.pk, third.pk]).values_list("pk", "status"))
    assert statuses == {first.pk: "pending", second.pk: "pending", third.pk: "approved"}


@pytest.mark.django_db
@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=LIMIT)
def test_accepting_many_offered_definitions_can_be_confirmed() -> None:
    """Found: "Accept the definition offered now" of 25 tools posted 50 fields at the confirm (a reviewed hash and
    a ``_selected_action`` each): over the limit of 40, Django answered 400 and nothing was accepted (with the
    default limit: about 500 tools).

    Expect: the confirm is read and every listed definition is accepted, each bound to the hash reviewed.
    """
    server = RemoteMcpServer.objects.create(name="crm", url="http://127.0.0.1:9/mcp", risk="low")
    offered = {"name": "lookup", "description": "Look up.", "inputSchema": {"type": "object"}}
    tools = RemoteMcpTool.objects.bulk_create(
        RemoteMcpTool(
            server=server,
            remote_name=f"lookup_{i}",
            tool_name=f"crm__lookup_{i}",
            status="new",
            current_definition=offered,
            current_hash=definition_hash(offered),
        )
        for i in range(ROWS)
    )
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    confirmation = action_confirmation(client, REMOTE_TOOLS, "accept_offered", [t.pk for t in tools])

    answer = client.post(REMOTE_TOOLS, {**confirmation, "confirm": "on"}, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert RemoteMcpTool.objects.filter(status="active").count() == ROWS


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=LIMIT)
def test_a_selection_too_large_for_one_page_is_refused_with_a_message(acme: AcmeData, acme_operator: User) -> None:
    """Found: selecting more rows than one page can post back (a ``_selected_action`` each) showed a confirmation
    page whose confirm Django refused with a bare 400.

    Expect: no page; the operator is told how many to select at most, and nothing is decided.
    """
    most = LIMIT - 5  # the CSRF token, ``action``, ``apply``, ``marks`` and the comment
    pending = pending_copies(acme, most + 1, key="cv")
    client = console(acme_operator)

    answer = client.post(
        APPROVALS, {"action": "approve_selected", "_selected_action": [str(r.pk) for r in pending]}, follow=True
    )

    said = [str(m) for m in answer.context["messages"]]
    assert f"{most + 1} rows are selected; select at most {most} for one confirmation. Nothing was done." in said
    assert 'id="action-with-comment-form"' not in answer.content.decode()
    assert not ApprovalRequest.objects.filter(status=ApprovalStatus.APPROVED).exists()
