"""Review of 2026-12-05 (cz): a regression review of the confirmation pages' shared marks (reviews cv, cx, m, bn, cs).

Each test fails on the reviewed code (main at a677711) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A row id that is no primary key (``_selected_action`` garbled, empty, or a number past 64 bits) posted to any
   action of a ``CommentActionMixin`` list (approvals, sagas, compensations, runs, calls, remote MCP tools), with
   the action or with its confirmation, raised in Django's ``filter(pk__in=...)``: a 500 instead of a message. The
   mixin now checks each id with the list's primary key field first and answers "'<id>' names no row of this list;
   nothing was done".
2. ``compensations_retry/resolve(seen=...)`` (``_hold_as_seen``) locked only the sagas of the rows in scope then,
   compared the page's marks with one read of the scope and acted on a second read. A compensation of another
   selected saga (not locked: nothing of it needed attention) that failed between the two reads was retried (or
   resolved) unseen, in the operator's name. The rows compared are now the rows acted on, read once.

Checked and holding:

- Marks: duplicates (the row refused as not listed), a pk of a row not listed or of another tenant (ignored: only
  the admin's tenant-scoped rows are iterated; for sagas, a mark outside the scope fails the whole comparison),
  any unicode whitespace between marks (``str.split``), huge, negative or zero pks in marks (compared as text, no
  query), unicode digits (``_selected_action`` "\u0661" is row 1 through ``int``, and its page then carries "1";
  a mark "\u0661:..." never matches "1"), a hash of another version (the service refuses), a mark without
  ``fields_version`` (garbled: refused as not listed). Negative, zero, padded or unicode-digit ``_selected_action``
  ids answer the list (200/302), never a 500.
- Rows moving between page and confirm: a request decided or edited by someone else (the service's round/hash
  check under its row lock), a tool definition changed (``DEFINITION_CHANGED``), an MCP definition fetched again
  (``remote_tool_accept`` compares under ``select_for_update``), a compensation that moved or a saga newly needing
  attention (refused whole, tests of review m).
- Four-eyes, with the requester an operator who is a member of two tenants: "Approve selected" of their own
  request is refused ("You started this call; another operator must decide it"), and the sagas' and compensations'
  "Resolve by hand" of their own step are refused ("undoes your own step"); nothing changes. Retry has no
  four-eyes rule (it undoes, never keeps, the step) and none was added.
- An operator of tenant B posting tenant A's page (marks and ``_selected_action``): the rows drop out of the
  tenant-scoped queryset; approvals report nothing of A's, sagas answer "changed since you read this page", as
  for a missing row (probe d, review m).
- Field limit and per-page maximum: ``rows_per_confirmation`` counts the confirm POST exactly (CSRF, action, apply,
  one marks field, the form's fields, one ``_selected_action`` per row); the list's own first POST adds
  ``select_across`` and ``index`` (Django's); a selection over the maximum gets "select at most N" and a limit
  under the page's own fields the cx message.
- Transactions: the sagas' retry and resolve hold every transition and its audit event in one transaction (the
  sagas locked in id order), compensation calls dispatched with ``on_commit``; each approval decision is its own
  transaction (``_decide_in_transaction``) with its notification after commit; an MCP accept writes its audit
  event and the row in one ``transaction.atomic``.
- Browser flows: tests/browser/test_console_desk.py, test_approvals_admin.py, test_run_cancel_admin.py pass.

Noted, not changed: the marks field is one field but grows with the rows: a sagas list page listing some 40,000
compensations needing attention (about 60 bytes each, url-encoded) would pass ``DATA_UPLOAD_MAX_MEMORY_SIZE``
(2.5 MB) and be refused by Django with a bare 400; ``rows_per_confirmation`` bounds the selected sagas, not their
compensations. Far beyond a run's saga (its steps are bounded by its agent's tool-call limit); a direct saga's
steps are not bounded.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData
from toolhub.models import AuditEvent
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus

APPROVALS = "/admin/approvals/approvalrequest/"
SAGAS = "/admin/sagas/saga/"
COMPENSATIONS = "/admin/sagas/compensation/"
RUNS = "/admin/agents_app/agentrun/"


def _hold(acme: AcmeData) -> None:
    """acme's debit waits for an operator's decision: retrying it pays the money back."""
    Compensation.objects.filter(pk=acme.compensation.pk).update(status=CompensationStatus.HELD)
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)


def _messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bad", ["abc", "", "99999999999999999999999"])
@pytest.mark.parametrize(
    ("changelist", "action"),
    [
        (APPROVALS, "approve_selected"),
        (SAGAS, "retry_selected"),
        (COMPENSATIONS, "resolve_selected"),
        (RUNS, "cancel_selected"),
    ],
)
@pytest.mark.parametrize("confirming", [False, True])
def test_a_malformed_row_id_is_refused_with_a_message(
    changelist: str, action: str, bad: str, confirming: bool, acme: AcmeData, acme_operator: User
) -> None:
    """Found: a selected row id that is no primary key (a tampered or cut-short form: letters, empty, a number past
    64 bits), posted with the action or with its confirmation, raised in Django's ``filter(pk__in=...)``: a 500.

    Expect: the list again with "names no row of this list; nothing was done", nothing decided or retried.
    """
    _hold(acme)
    client = console(acme_operator)
    listed = {APPROVALS: acme.approval.pk, SAGAS: acme.saga.pk, COMPENSATIONS: acme.compensation.pk}
    posted: dict[str, Any] = {
        "action": action,
        "_selected_action": [str(listed.get(changelist, acme.waiting_run.pk)), bad],
    }
    if confirming:
        posted.update(apply="yes", marks="1:x:y", comment="ok", note="done by hand")
    else:
        posted.update(index="0")
    events = AuditEvent.objects.count()

    answer = client.post(changelist, posted, follow=True)

    assert answer.status_code == 200
    assert any(f"{bad!r} names no row of this list; nothing was done" in m for m in _messages(answer)), _messages(
        answer
    )
    assert AuditEvent.objects.count() == events
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.PENDING
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.HELD
    assert AgentRun.objects.get(pk=acme.waiting_run.pk).status == RunStatus.WAITING


def _other_saga(acme: AcmeData) -> Compensation:
    """A second saga of acme's with one compensable step, recorded (nothing needs attention in it)."""
    saga = Saga.objects.create(key="acme-second-saga", tenant="acme", status=SagaStatus.OPEN, last_sequence=1)
    return Compensation.objects.create(
        saga=saga,
        sequence=1,
        step_call=acme.artifact_call,
        step_tool=acme.artifact_call.tool_name,
        tool_name="credit",
        status=CompensationStatus.RECORDED,
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("changelist", [SAGAS, COMPENSATIONS])
def test_a_retry_acts_on_the_compensations_it_compared(
    changelist: str, acme: AcmeData, acme_operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``compensations_retry(seen=...)`` locked only the sagas of what needed attention, compared the page's
    marks with one query and then read the compensations to retry with a second one. A compensation of another
    selected saga (not locked: nothing of it needed attention) that failed between the two queries was retried
    unseen, in the operator's name.

    Expect: the retry acts on exactly the rows whose marks it compared: the page's one held compensation is
    retried, the other one, failed after the comparison, is left failed for an operator to read.
    """
    _hold(acme)
    other = _other_saga(acme)
    client = console(acme_operator)
    selected = [acme.saga.pk, other.saga_id] if changelist == SAGAS else [acme.compensation.pk, other.pk]
    confirmation = action_confirmation(client, changelist, "retry_selected", selected)
    assert len(confirmation["marks"].split()) == 1

    from toolhub.sagas import recovery

    marked, real_mark = [], recovery.compensation_mark

    def mark_then_fail_the_other(compensation: Compensation) -> str:
        # Right after the service's comparison read its rows, a worker (of the unlocked saga) records the other
        # compensation as failed (the admin's page marks go through its own import, not this one).
        marked.append(compensation.pk)
        if len(marked) == 1:
            Compensation.objects.filter(pk=other.pk).update(status=CompensationStatus.FAILED)
        return real_mark(compensation)

    monkeypatch.setattr(recovery, "compensation_mark", mark_then_fail_the_other)
    answer = client.post(changelist, confirmation, follow=True)

    assert any("1 compensation(s) retried." in m for m in _messages(answer)), _messages(answer)
    assert Compensation.objects.get(pk=other.pk).status == CompensationStatus.FAILED
    retried = AuditEvent.objects.filter(event_type="compensation.retry_requested")
    assert retried.count() == 1
