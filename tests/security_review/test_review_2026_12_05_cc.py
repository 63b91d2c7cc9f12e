"""Review of 2026-12-05 (cc): the desk's pages when they are stale or their forms are submitted twice.

Each test fails on the reviewed code (main at 67c83ca) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A decision form posted from a page opened before the tool's definition changed edited arguments the
   operator never saw: the desk rebuilt the form from the tool as it is at the POST, and a parameter the page
   did not show (sensitive then, no longer sensitive now: a change that keeps the tool's version, so the
   round and hash still matched) was missing from the POST, read as "emptied", recorded as the operator's
   edit and, with one approver, released and run with the value blanked. Now a generated field the POST does
   not carry is no field of the decision (``approvals.forms.ApproveForm``): a browser posts every field it showed.
2. A page opened before a new version of the tool was deployed (a changed schema: the amount a number, now
   text) was read with the new schema: an untouched Approve posted "5000" where 5000 was, which the desk
   recorded as the operator's edit (a new round) and answered "was approved", while the worker held the call
   again for its new version.
3. A page opened before a parameter was made sensitive (the version unchanged): the operator's correction of it
   in its field was dropped without a word (the rebuilt form had no such field) and the call released and run
   with the value they had just corrected.
   Fix of 2 and 3: the page's form carries ``fields_version`` (the tool's version and its sensitive names, what
   made the fields), and an approval posted from a page of another one is refused with nothing recorded: "The
   tool's definition changed since you read this page" (``approvals.forms``, the desk's ``decide_view``).

Checked and found holding (no test here; Django's test client replaying the posts):

- Approve pressed twice (one approver: the second is told "already approved"; two approvers: "You already
  approved this version"); Edit-and-approve pressed twice (the second carries the old round and is refused
  "The arguments changed since you looked", nothing recorded, the tool ran once); Reject twice (the second
  "already rejected"); the back button and a re-POST after the decision (refused, same answers).
- Two operators on one page: one edits and approves, the other approves the stale page: refused by the
  round/hash with the current round named, nothing recorded (already in 2026-12-05 af/bt; not repeated).
- A page opened before the operator's decide permission or tenant membership was revoked: the POST is
  refused (403 without the permission, "not found" once out of the tenant, the login page once no longer
  staff), nothing recorded; the services
  judge the decider as they are at the decision (``decider_as_now``).
- A call whose tool's version changed after an approval released it: the worker holds it again for a fresh
  decision (``tool_call_require_reapproval``) (read in the code, ``toolhub.execution``).
- An approve form kept open past the expiry: "This approval request expired; nothing was changed" (2026-12-05 af).
- The saga page's Retry posted twice (a compensation that failed, its cause fixed): "1 compensation(s)
  retried." then "Nothing to do: no compensation needs attention.", the compensation ran once; runs' "Cancel"
  confirmation posted twice: "Cancelled 1 run(s)." then "1 selected run(s) had ended already and were left as
  they are.", one ``run.cancelled`` event. The console has no Rollback button (rollbacks are the API's).
- CSRF (Chromium): a desk page opened before a logout and login in another tab posts a token login rotated:
  403, nothing recorded.
"""

import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from tests.testapp.models import SideEffect
from toolhub import Param, Risk, ToolContext
from toolhub.models import CallStatus
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]
DESK = "/admin/approvals/approvalrequest/"


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _hidden(page_text: str, name: str) -> str:
    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', page_text)
    assert match, f"no hidden {name} on the page"
    return match.group(1)


def wire_note(
    amount: Annotated[int, Param("How much to wire.")],
    ctx: ToolContext,
    memo: Annotated[str, Param("The bank's reference for the wire.")] = "",
) -> dict:
    """Wire an amount with a memo; each execution records one side effect."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="wire_note", note=f"{amount}:{memo}")
    return {"effect_id": effect.pk}


@pytest.fixture
def wire_tools() -> Iterator[tuple[Tool, Tool]]:
    """``wire_note`` with its memo sensitive, and the same tool as its developer redefines it: memo shown."""
    before = Tool.from_function(wire_note, risk=Risk.HIGH, sensitive=("memo",))
    after = Tool.from_function(wire_note, risk=Risk.HIGH)
    with registry.temporarily(before):
        yield before, after


def test_a_page_opened_before_a_parameter_stopped_being_sensitive_edits_nothing(
    wire_tools: tuple[Tool, Tool],
    request_call: Any,
    alice: User,
    operator: User,
    committed: Committed,
) -> None:
    """Found: the operator opens alice's held wire (its memo sensitive: not shown, no field). The developer then
    ships the tool with the memo no longer sensitive (its version unchanged: sensitivity is not part of it). The
    operator presses Approve on the open page: the desk rebuilt the form with a memo field, read the memo the
    page never posted as emptied, recorded "edit" in the operator's name (round 2) and ran the wire with the memo
    blanked.

    Expect: an approval of round 1, no edit; the wire runs once with the memo the model sent. (Posted as a client
    that sends no ``fields_version``; the browser's page, which does, is refused as in the tests below.)
    """
    before, after = wire_tools
    assert before.version == after.version
    call = request_call("wire_note", {"amount": 5000, "memo": "INV-2026-118"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    client = _client(operator)
    shown = client.get(f"{DESK}{request.pk}/change/").content.decode()
    assert 'name="arg__memo"' not in shown
    posted = {"round": _hidden(shown, "round"), "arguments_hash": _hidden(shown, "arguments_hash")}
    posted["arg__amount"] = re.search(r'name="arg__amount" value="(\d+)"', shown).group(1)  # type: ignore[union-attr]

    registry._tools[after.name] = after  # the new definition is deployed while the page is open

    committed(client.post, f"{DESK}{request.pk}/approve/", posted)

    request.refresh_from_db()
    assert list(ApprovalDecision.objects.filter(request=request).values_list("decision", "round")) == [
        (DecisionKind.APPROVE, 1)
    ]
    assert request.status == ApprovalStatus.APPROVED
    assert request.arguments == {"amount": 5000, "memo": "INV-2026-118"}
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert list(SideEffect.objects.filter(tool="wire_note").values_list("note", flat=True)) == ["5000:INV-2026-118"]


def wire_note_in_words(
    amount: Annotated[str, Param("How much to wire, in digits or in words.")],
    ctx: ToolContext,
    memo: Annotated[str, Param("The bank's reference for the wire.")] = "",
) -> dict:
    """Wire an amount with a memo; the amount may now be written out."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="wire_note", note=f"{amount}:{memo}")
    return {"effect_id": effect.pk}


def test_a_page_opened_before_the_tools_schema_changed_is_refused_not_taken_for_an_edit(
    request_call: Any,
    alice: User,
    operator: User,
    committed: Committed,
) -> None:
    """Found: the operator opens alice's held wire (amount an integer); a new version of the tool, whose amount is
    text, is deployed; the operator presses Approve on the open page, touching nothing. The desk read the page's
    fields with the new schema: the amount posted as "5000" differed from 5000, so it recorded an edit in the
    operator's name (round 2, amount 5000 -> "5000"), told them "was approved", and the worker held the call again
    (its version changed): a change nobody made on the trail, and an answer that was not what happened.

    Expect: the approval is refused with nothing recorded and the operator told that the tool's definition changed
    since the page was read; the request stays in round 1, pending.
    """
    before = Tool.from_function(wire_note, risk=Risk.HIGH)
    after = Tool.from_function(wire_note_in_words, name="wire_note", risk=Risk.HIGH)
    assert before.version != after.version
    with registry.temporarily(before):
        call = request_call("wire_note", {"amount": 5000, "memo": "INV-2026-118"}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        client = _client(operator)
        shown = client.get(f"{DESK}{request.pk}/change/").content.decode()
        # every hidden field of the decision form, as the browser posts them (round, hash, and what else it binds)
        posted = dict(re.findall(r'<input type="hidden" name="(?!csrf)(\w+)" value="([^"]*)"', shown))
        assert {"round", "arguments_hash"} <= set(posted)
        posted.update(arg__amount="5000", arg__memo="INV-2026-118")

        registry._tools[after.name] = after  # the new version is deployed while the page is open

        answer = committed(client.post, f"{DESK}{request.pk}/approve/", posted, follow=True)

    messages = [str(message) for message in answer.context["messages"]]
    assert any("definition changed" in message for message in messages), messages
    request.refresh_from_db()
    assert not ApprovalDecision.objects.filter(request=request).exists()
    assert (request.status, request.round) == (ApprovalStatus.PENDING, 1)
    assert request.arguments == {"amount": 5000, "memo": "INV-2026-118"}
    assert not SideEffect.objects.filter(tool="wire_note").exists()


def test_an_edit_of_a_parameter_that_became_sensitive_meanwhile_is_not_dropped_silently(
    request_call: Any,
    alice: User,
    operator: User,
    committed: Committed,
) -> None:
    """Found: the operator opens alice's held wire and corrects its memo in its field; before they press Approve,
    the tool is redeployed with the memo sensitive (its version unchanged). The desk rebuilt the form without a
    memo field, dropped the correction without a word and released the wire with the memo the operator had just
    corrected: "Request #1 (wire_note) was approved."

    Expect: the approval is refused with nothing recorded, the operator told the tool's definition changed; the
    wire has not run.
    """
    before = Tool.from_function(wire_note, risk=Risk.HIGH)
    after = Tool.from_function(wire_note, risk=Risk.HIGH, sensitive=("memo",))
    assert before.version == after.version
    with registry.temporarily(before):
        call = request_call("wire_note", {"amount": 5000, "memo": "INV-2026-118"}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        client = _client(operator)
        shown = client.get(f"{DESK}{request.pk}/change/").content.decode()
        posted = dict(re.findall(r'<input type="hidden" name="(?!csrf)(\w+)" value="([^"]*)"', shown))
        posted.update(arg__amount="5000", arg__memo="INV-2026-119")  # the operator corrects the reference

        registry._tools[after.name] = after  # the memo is made sensitive while the page is open

        answer = committed(client.post, f"{DESK}{request.pk}/approve/", posted, follow=True)

    messages = [str(message) for message in answer.context["messages"]]
    assert any("definition changed" in message for message in messages), messages
    request.refresh_from_db()
    assert not ApprovalDecision.objects.filter(request=request).exists()
    assert request.status == ApprovalStatus.PENDING
    assert not SideEffect.objects.filter(tool="wire_note").exists()
