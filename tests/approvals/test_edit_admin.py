"""The approval desk in the admin: the version under approval, edits as form input, stale pages refused."""

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.approvals.conftest import Hold
from tests.helpers import RequestCall
from tests.testapp.models import SideEffect
from toolhub.arguments import MAX_NESTING
from toolhub.models import AuditEvent

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _page(client: Client, request: ApprovalRequest) -> str:
    response = client.get(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def _hidden(page: str, name: str) -> str:
    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', page)
    assert match, f"no hidden {name} on the page"
    return match.group(1)


def _decide(client: Client, request: ApprovalRequest, decision: str, **fields: Any) -> Any:
    return client.post(f"/admin/approvals/approvalrequest/{request.pk}/{decision}/", fields)


def test_the_page_shows_the_version_that_will_run_and_carries_it_in_the_form(
    hold: Hold, operator: User, second_operator: User, committed: Committed
) -> None:
    # given a call an operator edited
    request = hold("pay 5000", approvers=2)
    committed(approval_approve, request_id=request.pk, user=second_operator, arguments={"note": "pay 9000"})
    fresh = ApprovalRequest.objects.get(pk=request.pk)

    # when another operator opens it
    page = _page(_client(operator), request)

    # then they read the arguments that will run, what changed, the round, and the form names that version
    assert "Arguments that will run" in page
    assert "&quot;note&quot;: &quot;pay 9000&quot;" in page
    assert "Changed from the model&#x27;s original" in page
    assert "&quot;before&quot;: &quot;pay 5000&quot;" in page
    assert "Round 2: 1 of 2 approval(s)" in page
    assert _hidden(page, "round") == "2"
    assert _hidden(page, "arguments_hash") == fresh.arguments_hash
    assert json.loads(
        re.search(r'name="arguments"[^>]*>\s*(.*?)</textarea>', page, re.S).group(1).replace("&quot;", '"')
    ) == {"note": "pay 9000"}


def test_approving_from_a_page_whose_arguments_changed_is_refused(
    hold: Hold, operator: User, second_operator: User, committed: Committed
) -> None:
    # given an operator who opened round 1, then another edited the call
    request = hold("pay 5000", approvers=2)
    client = _client(operator)
    page = _page(client, request)
    committed(approval_approve, request_id=request.pk, user=second_operator, arguments={"note": "pay 9000"})

    # when the first operator approves from their page
    response = _decide(
        client,
        request,
        "approve",
        comment="looks fine",
        round=_hidden(page, "round"),
        arguments_hash=_hidden(page, "arguments_hash"),
        arguments=json.dumps({"note": "pay 5000"}),
    )

    # then they are told to look again, and nothing of theirs is recorded
    assert response.status_code == 302
    shown = client.get(response["Location"]).content.decode()
    assert "the arguments changed since you looked; review them again" in shown.lower()
    assert not ApprovalDecision.objects.filter(request=request, decided_by=operator).exists()
    assert ApprovalRequest.objects.get(pk=request.pk).arguments == {"note": "pay 9000"}
    assert SideEffect.objects.count() == 0


def test_editing_in_the_form_opens_a_new_round(hold: Hold, operator: User) -> None:
    request = hold("pay 5000", approvers=2)
    client = _client(operator)
    page = _page(client, request)

    response = _decide(
        client,
        request,
        "approve",
        comment="corrected the amount",
        round=_hidden(page, "round"),
        arguments_hash=_hidden(page, "arguments_hash"),
        arguments=json.dumps({"note": "pay 500"}),
    )

    assert response.status_code == 302
    after = client.get(response["Location"]).content.decode()
    assert "was recorded (round 2); it needs 1 more approver(s)" in after
    assert 'id="approved-this-round"' in after and "another operator must approve it" in after
    fresh = ApprovalRequest.objects.get(pk=request.pk)
    assert (fresh.round, fresh.arguments, fresh.status) == (2, {"note": "pay 500"}, ApprovalStatus.PENDING)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"note": "pay\\u0000 500"}', "note contains a NUL character"),
        ('{"note": "pay \\ud800 500"}', "note contains an invalid character (a lone surrogate)"),
        ('{"note": ' + "[" * (MAX_NESTING + 50) + "]" * (MAX_NESTING + 50) + "}", "nested deeper than"),
        ('{"note": ' + "[" * 5000 + "]" * 5000 + "}", "Arguments are nested deeper than"),
        ('{"note": 500}', "- note: Input should be a valid string"),
        ("[1, 2]", "Arguments must be a JSON object"),
        ('{"note": "unterminated', "Arguments are not valid JSON"),
    ],
    ids=["nul", "lone-surrogate", "deeply-nested", "thousands-deep", "wrong-type", "not-an-object", "not-json"],
)
def test_unusable_edits_are_form_errors_and_write_nothing(
    hold: Hold, operator: User, arguments: str, message: str
) -> None:
    # given a pending request
    request = hold("pay 5000")
    client = _client(operator)
    page = _page(client, request)
    events = AuditEvent.objects.count()

    # when the operator approves with arguments that cannot be used
    response = _decide(
        client,
        request,
        "approve",
        comment="edited",
        round=_hidden(page, "round"),
        arguments_hash=_hidden(page, "arguments_hash"),
        arguments=arguments,
    )

    # then the page comes back with the error at the arguments field, and nothing was written or run
    assert response.status_code == 200
    body = response.content.decode()
    errors = re.search(r'field-decision-arguments">\s*<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', body, re.S)
    assert errors and message in errors.group(1).replace("&#x27;", "'")
    assert "Nothing was recorded: correct the errors below." in body
    fresh = ApprovalRequest.objects.get(pk=request.pk)
    assert (fresh.status, fresh.round, fresh.arguments) == (ApprovalStatus.PENDING, 1, {"note": "pay 5000"})
    assert not ApprovalDecision.objects.exists()
    assert AuditEvent.objects.count() == events
    assert SideEffect.objects.count() == 0


def test_approve_selected_is_bound_to_the_versions_listed(
    hold: Hold, operator: User, second_operator: User, committed: Committed
) -> None:
    # given two pending requests, listed on the confirmation page of "Approve selected"
    first, second = hold("pay 10"), hold("pay 20", approvers=2, only_this=True)
    client = _client(operator)
    selected = {"action": "approve_selected", "_selected_action": [first.pk, second.pk]}
    confirmation = client.post("/admin/approvals/approvalrequest/", selected).content.decode()
    assert "&quot;note&quot;: &quot;pay 20&quot;" in confirmation
    marks = _hidden(confirmation, "marks")  # each row's version as the page listed it

    # when another operator edits the second before the first operator confirms
    committed(
        approval_approve,
        request_id=second.pk,
        user=second_operator,
        arguments={"note": "pay 20000"},
        expected_round=1,
    )
    response = client.post(
        "/admin/approvals/approvalrequest/",
        {**selected, "apply": "yes", "comment": "both fine", "marks": marks},
        follow=True,
    )

    # then the first is approved and the changed second is reported, not approved by this operator
    body = response.content.decode()
    assert "1 request(s) approved." in body
    assert f"#{second.pk} (risky_effect): The arguments changed since you looked" in body
    assert ApprovalRequest.objects.get(pk=first.pk).status == ApprovalStatus.APPROVED
    assert not ApprovalDecision.objects.filter(request=second, decided_by=operator).exists()


def test_sensitive_values_appear_nowhere_on_the_page_and_are_kept_by_an_edit(
    secret_tool: None,
    request_call: RequestCall,
    alice: User,
    operator: User,
    second_operator: User,
    committed: Committed,
) -> None:
    # given a critical call with a secret, edited by one operator
    call = request_call("rotate_secret", {"username": "bob", "password": "old-secret-1"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    committed(approval_approve, request_id=request.pk, user=second_operator, arguments={"username": "robert"})

    # when the other operator opens it and approves it unchanged from the form
    client = _client(operator)
    page = _page(client, request)
    committed(
        _decide,
        client,
        request,
        "approve",
        round=_hidden(page, "round"),
        arguments_hash=_hidden(page, "arguments_hash"),
        arguments=re.search(r'name="arguments"[^>]*>\s*(.*?)</textarea>', page, re.S).group(1).replace("&quot;", '"'),
    )

    # then the secret was never on the page, and the approved version ran with it
    assert "old-secret-1" not in page
    assert "robert" in page
    call.refresh_from_db()
    assert call.arguments == {"username": "robert", "password": "old-secret-1"}
    assert SideEffect.objects.get().note == "robert:old-secret-1"
