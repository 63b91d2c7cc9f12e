"""Review of 2026-12-05 (m): the console's bulk actions bound to what the operator saw, and the locked password page.

Each test fails on the reviewed code (main at 6b7a75b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The sagas' and compensations' lists' bulk "Retry" ran at once on whatever needed attention at the POST: a
   compensation whose state moved between the list and the click (a first retry that finished as unknown), or a
   saga that gained a new failed compensation, was retried unseen, in the operator's name. Now "Retry" shows a
   confirmation page listing exactly the compensations it will retry, each with its mark (id, status, attempts,
   last change) in a hidden field; confirming runs ``compensations_retry(seen=...)``, which compares the marks under
   the sagas' row locks and refuses the whole retry, nothing retried, when any differs. The saga page's own Retry
   (``saga_retry``, review ci) now goes through the same service.
2. The same lists' "Resolve by hand" showed a confirmation page, but the confirming POST resolved what needed
   attention then: a compensation of the saga that failed after the page was read was marked resolved unseen, and
   toolhub would never run it. Its page now carries the same marks and ``compensations_resolve(seen=...)`` refuses,
   nothing resolved, when they differ.
3. While a (username, address) pair was locked out by django-axes, a GET of the admin's password-change page still
   showed the form (only its POST was refused): a locked-out user was invited to type a password. The GET now answers
   the lockout page (429, Retry-After), as the POST does.

Checked and holding (the other bulk actions, ``actions =`` / ``@admin.action``):

- Approvals' "Approve selected": bound per row to the arguments hash and ``fields_version`` on its confirmation
  page (review ci); "Reject selected" refuses what is no longer pending (a rejection runs nothing).
- Runs' and calls' "Cancel selected": a stop, not an execution; each row is withdrawn by a conditional transition
  (``run_cancel_by``, ``tool_call_cancel`` refuse a run or call that ended or started), so a row that moved
  since the page is left as it is and reported; nothing runs that the operator did not see.
- Remote MCP tools' "Accept offered": bound to each definition's hash shown (``reviewed_hash``), refused when the
  server changed it since. Servers' "Fetch tools": reads the server's offer and quarantines changes; it acts on no
  state shown on the page (idempotent).
- The password-change page's POST while locked still goes through ``password_verify`` (axes refuses it and restarts
  the cool-off, as for a login); only the GET answers the lockout up front, and reads the count without adding to it
  (the page from another address, and before the lockout, is the form).
- The confirmation pages act on the selected rows re-read from the admin's tenant-scoped queryset
  (``CommentActionMixin``): another tenant's ids mixed into a confirmed retry or resolve act on nothing of theirs
  (tests/security_review/test_probe_2026_12_03_d.py, now confirming with the page's marks); a mark forged for a row
  outside the scope is not among the scope's marks, so the comparison refuses the confirm.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from demo.models import Account
from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData
from toolhub.models import AuditEvent
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus

SAGAS = "/admin/sagas/saga/"
COMPENSATIONS = "/admin/sagas/compensation/"


def _hold(acme: AcmeData) -> None:
    """acme's debit waits for an operator's decision: retrying it pays the money back."""
    Compensation.objects.filter(pk=acme.compensation.pk).update(status=CompensationStatus.HELD)
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)


def _messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def _nothing_retried(acme: AcmeData) -> None:
    assert not AuditEvent.objects.filter(event_type="compensation.retry_requested").exists()
    assert Account.objects.get(account_id="ACC-ACME").balance == 900


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("changelist", "selected"), [(SAGAS, "saga"), (COMPENSATIONS, "compensation")])
def test_a_list_retry_refuses_a_compensation_that_changed_since_the_page(
    changelist: str, selected: str, acme: AcmeData, acme_operator: User
) -> None:
    """Found: the operator ticks acme's saga (or its compensation, held) and chooses "Retry"; it ran at once on what
    needed attention at the POST. A first retry (a colleague, a double click) that finished as unknown between the
    list and the click was retried again, unseen.

    Expect: "Retry" first lists what it will retry; when the compensation moved (held, then unknown after one
    attempt) before the operator confirms, the whole retry is refused ("changed since you read this page"), nothing
    retried, the money still debited.
    """
    _hold(acme)
    client = console(acme_operator)
    pk = acme.saga.pk if selected == "saga" else acme.compensation.pk

    confirmation = action_confirmation(client, changelist, "retry_selected", [pk])
    _nothing_retried(acme)  # choosing the action only shows what it will do
    Compensation.objects.filter(pk=acme.compensation.pk).update(status=CompensationStatus.UNKNOWN, attempts=1)
    answer = client.post(changelist, confirmation, follow=True)

    messages = _messages(answer)
    assert any("changed since you read this page; nothing was retried" in m for m in messages), messages
    _nothing_retried(acme)
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.UNKNOWN


@pytest.mark.django_db(transaction=True)
def test_the_saga_list_retry_refuses_a_saga_that_gained_a_compensation_needing_attention(
    acme: AcmeData, acme_operator: User
) -> None:
    """Found: between the list and "Retry", another step of acme's saga failed to compensate; the action retried it
    with the one the operator had read.

    Expect: the confirmation page lists the one held compensation; the new failed one makes the confirm refused,
    nothing retried, both left as they are.
    """
    _hold(acme)
    client = console(acme_operator)
    confirmation = action_confirmation(client, SAGAS, "retry_selected", [acme.saga.pk])
    assert len(confirmation["marks"].split()) == 1

    newly_failed = _newly_failed(acme)
    answer = client.post(SAGAS, confirmation, follow=True)

    assert any("changed since you read this page" in m for m in _messages(answer)), _messages(answer)
    _nothing_retried(acme)
    assert Compensation.objects.get(pk=newly_failed.pk).status == CompensationStatus.FAILED
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.HELD


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("changelist", "selected"), [(SAGAS, "saga"), (COMPENSATIONS, "compensation")])
def test_a_list_retry_runs_what_its_page_listed_once(
    changelist: str, selected: str, acme: AcmeData, acme_operator: User
) -> None:
    """Found: (with the binding) the operator's own confirmation must still work, and a second POST of the same page
    (a double click) must not retry again.

    Expect: the page lists the held compensation with its step; confirming retries it ("1 compensation(s)
    retried.", the money paid back); posting the same page again is refused as stale, one retry in the trail.
    """
    _hold(acme)
    client = console(acme_operator)
    pk = acme.saga.pk if selected == "saga" else acme.compensation.pk
    page = client.post(changelist, {"action": "retry_selected", "_selected_action": [str(pk)]}).content.decode()
    assert "Retry 1 compensation(s)" in page and acme.compensation.tool_name in page
    confirmation = action_confirmation(client, changelist, "retry_selected", [pk])

    first = client.post(changelist, confirmation, follow=True)
    second = client.post(changelist, confirmation, follow=True)

    assert "1 compensation(s) retried." in _messages(first)
    assert any("changed since you read this page" in m for m in _messages(second)), _messages(second)
    assert AuditEvent.objects.filter(event_type="compensation.retry_requested").count() == 1
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.SUCCEEDED
    assert Account.objects.get(account_id="ACC-ACME").balance == 1000


def _newly_failed(acme: AcmeData) -> Compensation:
    """Another step of acme's saga whose compensation failed (after the operator's page was read)."""
    return Compensation.objects.create(
        saga=acme.saga,
        sequence=acme.compensation.sequence + 1,
        step_call=acme.artifact_call,
        step_tool=acme.artifact_call.tool_name,
        tool_name="credit",
        status=CompensationStatus.FAILED,
        last_error="the bank timed out",
    )


@pytest.mark.django_db(transaction=True)
def test_the_saga_list_resolve_refuses_a_compensation_it_did_not_list(acme: AcmeData, acme_operator: User) -> None:
    """Found: the confirmation page of "Resolve by hand" listed acme's held compensation; another of the saga's
    compensations failed before the operator confirmed, and the confirm resolved both: the unseen one marked done
    by hand, never to run.

    Expect: refused ("changed since you read this page; nothing was resolved"), both left as they were, nobody
    named as having resolved anything.
    """
    _hold(acme)
    client = console(acme_operator)
    confirmation = action_confirmation(client, SAGAS, "resolve_selected", [acme.saga.pk])
    newly_failed = _newly_failed(acme)

    answer = client.post(SAGAS, {**confirmation, "note": "refunded by hand"}, follow=True)

    assert any("changed since you read this page; nothing was resolved" in m for m in _messages(answer))
    assert Compensation.objects.get(pk=newly_failed.pk).status == CompensationStatus.FAILED
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.HELD
    assert not Compensation.objects.filter(resolved_by__gt="").exists()


SESSION_THIEF = "203.0.113.77"


@pytest.mark.django_db
def test_the_password_change_page_answers_the_lockout_while_the_pair_is_locked(settings: Any, operator: User) -> None:
    """Found: after five wrong old passwords from one address, the POST of the password-change page answered the
    lockout (429) but its GET still showed the form, inviting a password it would refuse.

    Expect: the GET answers the same lockout page (429, Retry-After, "temporarily locked", no form); from another
    address the page is the form, and before the lockout it was the form there too.
    """
    settings.AXES_ENABLED = True
    client = Client(REMOTE_ADDR=SESSION_THIEF)
    client.force_login(operator)
    url = "/admin/password_change/"
    assert client.get(url).status_code == 200
    wrong = {"new_password1": "An-entirely-new-93", "new_password2": "An-entirely-new-93"}
    codes = [client.post(url, {"old_password": f"guess-{n}", **wrong}).status_code for n in range(5)]
    assert codes == [200, 200, 200, 200, 429]

    page = client.get(url)

    assert page.status_code == 429, page.status_code
    assert "temporarily locked" in page.content.decode() and 'name="old_password"' not in page.content.decode()
    assert page["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    elsewhere.force_login(operator)
    assert elsewhere.get(url).status_code == 200
