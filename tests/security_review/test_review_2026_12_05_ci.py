"""Review of 2026-12-05 (ci): two gaps 2026-12-05 cc left open, a console button not bound to what its page showed.

Each test fails on the reviewed code (main at fbaef4f) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The saga page's "Retry" retried whatever needed attention at the POST, not what the page showed: a compensation
   whose first retry (a double click, a colleague) finished as "unknown" meanwhile ran once more, in the operator's
   name, though they had only read it "held". Now the form carries what it showed (each compensation's id, status,
   attempts and last change), the service compares it under the saga's row lock (``saga_retry(seen=...)``) and
   refuses, nothing retried, when it differs: "... changed since you read this page".
2. The desk's "Approve selected" reported "approved" for a request whose tool was redeployed (a new version, or
   other sensitive names) after the confirmation page was rendered; the worker then held the call again. Now
   the confirmation page carries each request's ``fields_version`` and the action refuses those whose tool's
   definition changed, naming them, approving the rest.

Also fixed (found while running tests/approvals, no new test: tests/approvals/test_approvers.py, test_notifications.py
and test_governing_groups.py were red on main): since django-axes' backend sits beside ModelBackend, ``approvers_of``
raised ValueError (``with_perm`` needs a backend then): no approver was e-mailed; it now names ModelBackend.

Checked and found holding (no test here):

- The REST API has no saga retry (only runs' ``POST /api/v1/runs/{id}/retry/``, which resumes a run, and a direct
  saga's rollback): there is no expected state to take there.
- The direct saga API's rollback (``POST /api/v1/sagas/{id}/rollback/``) is no retry: it takes no expected state
  (not examined further here).

Not fixed: the sagas' and compensations' list actions "Retry" act on the selected rows as they are at the POST
(their lists show a saga's status, a compensation's status; the action posts only ids, and runs without a
confirmation page to carry marks): binding them needs a confirmation page listing the marks, as "Resolve" has.
"""

import re
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.helpers import RequestCall, console
from tests.tenancy.conftest import AcmeData
from tests.testapp.models import SideEffect
from toolhub import Param, Risk, ToolContext
from toolhub.models import AuditEvent
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

Committed = Callable[..., Any]
DESK = "/admin/approvals/approvalrequest/"


def _hidden_fields(html: str, form_id: str) -> dict[str, list[str]]:
    """The hidden inputs (CSRF aside) of the form ``form_id``, as the browser posts them."""
    form = re.search(rf'<form[^>]*id="{form_id}"[^>]*>(.*?)</form>', html, re.S)
    assert form, f"no form #{form_id} on the page"
    posted: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="(?!csrf)(\w+)" value="([^"]*)"', form.group(1)):
        posted.setdefault(name, []).append(value)
    return posted


@pytest.mark.django_db(transaction=True)
def test_the_saga_pages_retry_does_not_run_a_compensation_whose_state_changed_since_the_page(
    acme: AcmeData, acme_operator: User
) -> None:
    """Found: the operator reads acme's saga with its debit's compensation held and presses Retry; before the POST
    lands, a first retry of it (a double click, a colleague) ran and finished with its outcome unknown. The POST
    retried it again: "1 compensation(s) retried.", a second credit attempt the operator never looked at.

    Expect: refused, the operator told the compensations changed since they read the page; nothing retried (no
    ``compensation.retry_requested``), the compensation still unknown.
    """
    Compensation.objects.filter(pk=acme.compensation.pk).update(status=CompensationStatus.HELD)
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)
    client = console(acme_operator)
    page = client.get(f"/admin/sagas/saga/{acme.saga.pk}/change/").content.decode()
    posted = _hidden_fields(page, "saga-retry")

    # meanwhile the first retry ran and its outcome is unknown
    Compensation.objects.filter(pk=acme.compensation.pk).update(status=CompensationStatus.UNKNOWN, attempts=1)

    answer = client.post(f"/admin/sagas/saga/{acme.saga.pk}/retry/", posted, follow=True)

    messages = [str(message) for message in answer.context["messages"]]
    assert any("changed since you read this page" in message for message in messages), messages
    assert not any("compensation(s) retried." in message for message in messages), messages
    assert not AuditEvent.objects.filter(event_type="compensation.retry_requested").exists()
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.UNKNOWN


@pytest.mark.django_db(transaction=True)
def test_the_saga_pages_retry_runs_what_the_page_showed(acme: AcmeData, acme_operator: User) -> None:
    """Found: the same page's Retry posted twice (a double click) was read as "retry what needs attention now": the
    second POST was judged on the state at its arrival, not on the page (here: "Nothing to do", by luck of timing).

    Expect: the page's own POST retries the held compensation it showed, once ("1 compensation(s) retried.",
    the compensation succeeds); the second POST of the same form is refused as stale, nothing retried twice.
    """
    Compensation.objects.filter(pk=acme.compensation.pk).update(status=CompensationStatus.HELD)
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)
    client = console(acme_operator)
    page = client.get(f"/admin/sagas/saga/{acme.saga.pk}/change/").content.decode()
    posted = _hidden_fields(page, "saga-retry")

    first = client.post(f"/admin/sagas/saga/{acme.saga.pk}/retry/", posted, follow=True)
    second = client.post(f"/admin/sagas/saga/{acme.saga.pk}/retry/", posted, follow=True)

    assert "1 compensation(s) retried." in [str(message) for message in first.context["messages"]]
    assert any("changed since you read this page" in str(message) for message in second.context["messages"])
    assert AuditEvent.objects.filter(event_type="compensation.retry_requested").count() == 1
    assert Compensation.objects.get(pk=acme.compensation.pk).status == CompensationStatus.SUCCEEDED


def pay_note(
    amount: Annotated[int, Param("How much to pay.")],
    ctx: ToolContext,
    memo: Annotated[str, Param("The bank's reference for the payment.")] = "",
) -> dict:
    """Pay an amount with a memo; each execution records one side effect."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="pay_note", note=f"{amount}:{memo}")
    return {"effect_id": effect.pk}


def pay_note_in_words(
    amount: Annotated[str, Param("How much to pay, in digits or in words.")],
    ctx: ToolContext,
    memo: Annotated[str, Param("The bank's reference for the payment.")] = "",
) -> dict:
    """Pay an amount with a memo; the amount may now be written out."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="pay_note", note=f"{amount}:{memo}")
    return {"effect_id": effect.pk}


def ship_note(item: Annotated[str, Param("What to ship.")], ctx: ToolContext) -> dict:
    """Ship an item; each execution records one side effect."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="ship_note", note=item)
    return {"effect_id": effect.pk}


REDEPLOYED = {
    "a new version": Tool.from_function(pay_note_in_words, name="pay_note", risk=Risk.HIGH),
    "the memo made sensitive": Tool.from_function(pay_note, risk=Risk.HIGH, sensitive=("memo",)),
}


@pytest.mark.django_db
@pytest.mark.parametrize("change", list(REDEPLOYED))
def test_approve_selected_refuses_a_request_whose_tool_changed_since_the_confirmation_page(
    change: str,
    request_call: RequestCall,
    alice: User,
    operator: User,
    committed: Committed,
) -> None:
    """Found: the operator selects two held calls and opens "Approve selected"; before they confirm, ``pay_note`` is
    redeployed (a new version of its schema, or its memo made sensitive). The action answered "2 request(s)
    approved." for a page that showed the call under the old definition (and, for a new version, the worker held
    the call again at once).

    Expect: ``pay_note``'s request refused, named, with nothing recorded ("definition changed"); the other one
    approved and run.
    """
    with registry.temporarily(
        Tool.from_function(pay_note, risk=Risk.HIGH), Tool.from_function(ship_note, risk=Risk.HIGH)
    ):
        pay = ApprovalRequest.objects.get(
            call=request_call("pay_note", {"amount": 5000, "memo": "INV-1"}, alice, tenant="acme")
        )
        ship = ApprovalRequest.objects.get(call=request_call("ship_note", {"item": "chair"}, alice, tenant="acme"))
        client = Client()
        client.force_login(operator)
        selected = {"action": "approve_selected", "_selected_action": [pay.pk, ship.pk]}
        confirmation = client.post(DESK, selected).content.decode()
        hidden = _hidden_fields(confirmation, "action-with-comment-form")

        registry._tools["pay_note"] = REDEPLOYED[change]  # redeployed while the confirmation page is open

        answer = committed(client.post, DESK, {**selected, **hidden, "apply": "yes", "comment": "fine"}, follow=True)

    messages = [str(message) for message in answer.context["messages"]]
    assert "1 request(s) approved." in messages, messages
    assert any(f"#{pay.pk} (pay_note)" in m and "definition changed" in m for m in messages), messages
    pay.refresh_from_db()
    assert pay.status == ApprovalStatus.PENDING and not ApprovalDecision.objects.filter(request=pay).exists()
    assert ApprovalRequest.objects.get(pk=ship.pk).status == ApprovalStatus.APPROVED
    assert list(SideEffect.objects.values_list("tool", flat=True)) == ["ship_note"]
