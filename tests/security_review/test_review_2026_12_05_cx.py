"""Review of 2026-12-05 (cx): the shared ``marks`` field of the admin confirmation pages (review cv, admin_marks).

Each test fails on the reviewed code (main at 1a036ac) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. "Approve selected" read a binding whose parts were empty (``<pk>::``) as no binding at all: an empty
   ``arguments_hash`` became "the model's original arguments" and an empty ``fields_version`` "not sent", so the
   request was approved without being compared to any version or definition: the unbound approval cv refused for a
   missing mark, through an empty one. A row's binding is now compared as the page carried it: the hash exactly
   (an empty one matches only a request without one) and the definition exactly (an empty one only a tool that is
   no longer registered).
2. With a small ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (under the page's own fields) ``rows_per_confirmation`` was zero
   or negative and the operator was told to "select at most 0" (or -2) rows: no selection could ever be confirmed.
   The operator is now told that no confirmation page fits the setting, and nothing is done.

Checked and holding:

- A binding naming a pk not among the selected rows (another tenant's) is ignored: only the admin's own rows
  (tenant-scoped) are iterated; another tenant's ``_selected_action`` is dropped by the queryset
  (tests/security_review/test_probe_2026_12_03_d.py, tests/tenancy/test_admin_console.py).
- The same pk twice (different hashes, or the same mark twice) and a garbled mark: the row is refused as not listed
  (test_review_2026_12_05_cv.py).
- Request A's binding attached to request B: the service compares it with B's own hash (refused when they differ;
  the same hash is the same tool, version and arguments) and with B's tool's definition.
- A stored hash holds no ``:`` nor space: ``arguments_hash`` is ``approval_hash`` (hex) or empty, ``fields_version``
  16 hex or empty (a tool no longer registered), MCP's ``current_hash`` hex or empty, compensation marks ids,
  statuses, counts and ISO times; ``row_mark``/``marks_field`` refuse to build any other.
- "Reject selected" is unbound, as before: a rejection runs nothing, and its rows are the page's ``_selected_action``
  read through the tenant-scoped queryset.
- The decisions rate counts only requests that reach the service: a row refused as not listed or changed is not
  counted (its ``continue`` comes before ``_over_the_rate``).
- The four-eyes rule is the service's (``approval_may_decide``): unchanged by the marks.
- Every page using ``CommentActionPage`` (approvals, MCP accept, sagas' Retry/Resolve, runs' and calls' Cancel)
  was listed: runs and calls never carried hidden fields; the saga change page's Retry reads the same field.
  Browser flows: tests/browser/test_approvals_admin.py, test_console_desk.py, test_run_cancel_admin.py,
  test_audit_admin.py pass.
- ``DATA_UPLOAD_MAX_NUMBER_FIELDS = None``: no limit, every selection gets its page.

Noted, not changed: tests/tenancy/test_admin_sweep.py posts every action without marks, so its "Approve selected"
is now refused by the binding before the tenant scope is reached; "Reject selected" (the same ``_decide_selected``
and queryset) still exercises the scope there, and probe d posts a binding for it.
The one-request decision from the change page (``decide_view``) still reads an empty ``arguments_hash`` or
``fields_version`` as "not sent" (``definition_changed``, documented for scripts' own forms): outside cv's change,
and its own page always sends both.
"""

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData, pending_copies

APPROVALS = "/admin/approvals/approvalrequest/"


@pytest.mark.django_db(transaction=True)
def test_approve_selected_with_an_empty_binding_approves_nothing(acme: AcmeData, acme_operator: User) -> None:
    """Found: a confirm of "Approve selected" whose mark for a request was ``<pk>::`` (its hash and its tool's
    definition empty) approved that request unbound: the empty parts were read as "nothing to compare".

    Expect: such a request is refused and stays pending (an empty hash names a version it does not have, an empty
    definition a tool that is still registered); the request bound as the page showed it is approved.
    """
    first, second, third = pending_copies(acme, 3, key="cx")
    assert first.arguments_hash, "the request has a version to bind to"
    client = console(acme_operator)
    confirmation = action_confirmation(client, APPROVALS, "approve_selected", [first.pk, second.pk, third.pk])
    marks = {mark.split(":")[0]: mark for mark in confirmation["marks"].split()}
    _, arguments_hash, fields_version = marks[str(second.pk)].split(":")
    assert fields_version, "the tool is registered: the page names its definition"
    empty = [f"{first.pk}::", f"{second.pk}:{arguments_hash}:", marks[str(third.pk)]]

    answer = client.post(APPROVALS, {**confirmation, "marks": " ".join(empty), "comment": "fine"}, follow=True)

    said = [str(m) for m in answer.context["messages"]]
    assert "1 request(s) approved." in said, said
    assert any("2 request(s) could not be approved" in m for m in said), said
    statuses = dict(ApprovalRequest.objects.filter(pk__in=[first.pk, second.pk, third.pk]).values_list("pk", "status"))
    assert statuses == {first.pk: "pending", second.pk: "pending", third.pk: "approved"}


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=4)
def test_a_field_limit_too_small_for_any_page_says_so(acme: AcmeData, acme_operator: User) -> None:
    """Found: with ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` of 4 (less than the page's own five fields), selecting one
    request told the operator "select at most -1 for one confirmation": advice no selection can follow.

    Expect: the operator is told no confirmation page fits the setting (naming it); nothing is decided.
    """
    (request,) = pending_copies(acme, 1, key="cx")
    client = console(acme_operator)

    answer = client.post(APPROVALS, {"action": "approve_selected", "_selected_action": [str(request.pk)]}, follow=True)

    said = [str(m) for m in answer.context["messages"]]
    assert not any("select at most" in m for m in said), said
    assert any("DATA_UPLOAD_MAX_NUMBER_FIELDS" in m and "Nothing was done." in m for m in said), said
    assert 'id="action-with-comment-form"' not in answer.content.decode()
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.PENDING
