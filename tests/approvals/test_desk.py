"""The approval desk's list and forms: pending first and oldest first, fields generated from the tool's schema."""

import re
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from approvals.forms import ApproveForm
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_reject
from tests.approvals.conftest import Hold
from tests.testapp.models import SideEffect
from toolhub import Param, registry, tool
from toolhub.models import AuditEvent

pytestmark = pytest.mark.django_db


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rows(body: str) -> list[str]:
    return re.findall(r'<a href="/admin/approvals/approvalrequest/(\d+)/change/[^"]*">#', body)


def test_the_desk_opens_on_pending_oldest_first_with_the_count_in_the_title(
    hold: Hold, operator: User, second_operator: User
) -> None:
    # given three requests: the oldest and the newest pending, one in between already rejected
    oldest, decided, newest = hold("a"), hold("b"), hold("c")
    ApprovalRequest.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(hours=2))
    approval_reject(request_id=decided.pk, user=second_operator, comment="no")
    client = _client(operator)

    # when the operator opens the desk
    body = client.get("/admin/approvals/approvalrequest/").content.decode()

    # then it lists the pending ones, oldest first, and says how many wait
    assert _rows(body) == [str(oldest.pk), str(newest.pk)]
    assert "<title>Approval desk: 2 pending" in body
    assert "2\xa0hours" in body and "risky_effect" in body

    # "All" is a choice of its own, newest first; the count still names the pending ones
    every = client.get("/admin/approvals/approvalrequest/?status=all").content.decode()
    assert _rows(every) == [str(newest.pk), str(decided.pk), str(oldest.pk)]
    assert "Approval desk: 2 pending" in every
    assert _rows(client.get("/admin/approvals/approvalrequest/?status=rejected").content.decode()) == [str(decided.pk)]


def test_the_form_has_one_typed_field_per_parameter_and_none_for_a_sensitive_one(secret_tool: None) -> None:
    # calculate: two numbers and an enum given by a $ref
    form = ApproveForm(tool_name="calculate", current={"a": 1000, "op": "/", "b": 4})
    assert [field.name for field in form.argument_fields()] == ["arg__a", "arg__op", "arg__b"]
    assert form.fields["arg__op"].choices == [('"+"', "+"), ('"-"', "-"), ('"*"', "*"), ('"/"', "/")]
    assert form["arg__op"].initial == '"/"'

    # rotate_secret: the password is never a field (nor pre-filled anywhere)
    secret = ApproveForm(tool_name="rotate_secret", current={"username": "bob"})
    assert [field.name for field in secret.argument_fields()] == ["arg__username"]


@pytest.mark.parametrize(
    ("posted", "edit"),
    [
        ({"arg__a": "1000", "arg__op": '"/"', "arg__b": "4"}, None),
        ({"arg__a": "1000", "arg__op": '"*"', "arg__b": "4"}, {"op": "*"}),
        ({"arg__a": "2.5", "arg__op": '"/"', "arg__b": "4"}, {"a": 2.5}),
        ({"arg__a": "1000", "arg__op": '"/"', "arg__b": "4", "arguments": '{"b": 8}'}, {"b": 8}),
    ],
    ids=["unchanged", "enum", "number", "json-box"],
)
def test_the_edit_is_what_differs_from_the_version_on_the_page(posted: dict[str, str], edit: Any) -> None:
    form = ApproveForm(posted, tool_name="calculate", current={"a": 1000, "op": "/", "b": 4})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["edit"] == edit


def test_a_value_the_tool_no_longer_offers_stays_selected_and_untouched_is_no_edit(secret_tool: None) -> None:
    """The tool was deployed with other choices while the call was held: the held value is still the one selected,
    so an untouched Approve posts it back (a browser posts the first option when none is selected: an edit)."""
    form = ApproveForm(tool_name="calculate", current={"a": 1000, "op": "%", "b": 4})
    assert form.fields["arg__op"].choices[0] == ('"%"', "% (no longer one of the choices)")
    assert form["arg__op"].initial == '"%"'

    untouched = ApproveForm(
        {"arg__a": "1000", "arg__op": '"%"', "arg__b": "4"},
        tool_name="calculate",
        current={"a": 1000, "op": "%", "b": 4},
    )
    assert untouched.is_valid(), untouched.errors
    assert untouched.cleaned_data["edit"] is None


@pytest.mark.parametrize(
    ("posted", "field", "message"),
    [
        ({"arg__a": "lots", "arg__op": '"/"', "arg__b": "4"}, "arg__a", "Enter a number."),
        ({"arg__a": "1", "arg__op": '"%"', "arg__b": "4"}, "arg__op", "Select a valid choice."),
        ({"arg__a": "1", "arg__op": '"/"', "arg__b": ""}, "arg__b", "This field is required."),
        (
            {"arg__a": "1", "arg__op": '"*"', "arg__b": "4", "arguments": '{"op": "+"}'},
            "arguments",
            "op is edited both in its field and here",
        ),
    ],
    ids=["not-a-number", "not-in-enum", "required", "edited-twice"],
)
def test_a_bad_value_is_an_error_at_its_field(posted: dict[str, str], field: str, message: str) -> None:
    form = ApproveForm(posted, tool_name="calculate", current={"a": 1000, "op": "/", "b": 4})
    assert not form.is_valid()
    assert any(message in error for error in form.errors[field])


@tool
def tag_items(tags: Annotated[list[str], Param("Tags to set.")]) -> str:
    """Tag items (a parameter the desk edits as JSON text)."""
    return ",".join(tags)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[" * 100_000 + "]" * 100_000,
            "The value nests lists and objects 100000 levels deep; at most 99 are accepted.",
        ),
        ('["a\\u0000b"]', "The value cannot be stored: tags[0] contains a NUL character."),
    ],
    ids=["thousands-deep", "nul"],
)
def test_json_typed_into_a_field_is_an_error_at_that_field_when_it_cannot_be_used(text: str, message: str) -> None:
    with registry.temporarily(tag_items):
        form = ApproveForm({"arg__tags": text}, tool_name="tag_items", current={"tags": ["a"]})

        assert not form.is_valid()
    assert form.errors["arg__tags"] == [message]


def test_editing_a_field_on_the_page_opens_a_new_round_with_that_value(hold: Hold, operator: User) -> None:
    # given alice's note waits for approval
    request = hold("pay 5000")
    client = _client(operator)
    page = client.get(f"/admin/approvals/approvalrequest/{request.pk}/change/").content.decode()
    assert 'name="arg__note"' in page and 'value="pay 5000"' in page

    # when the operator changes the note in its field and approves
    response = client.post(
        f"/admin/approvals/approvalrequest/{request.pk}/approve/",
        {"arg__note": "pay 500", "comment": "less", "round": 1, "arguments_hash": request.arguments_hash},
    )

    # then the edited version was approved and ran, exactly once
    assert response.status_code == 302
    request.refresh_from_db()
    assert (request.status, request.round, request.arguments) == (ApprovalStatus.APPROVED, 2, {"note": "pay 500"})
    assert list(request.decisions.values_list("decision", flat=True)) == ["edit"]


def test_a_value_the_schema_refuses_leaves_everything_as_it_was(hold: Hold, operator: User) -> None:
    request = hold("pay 5000")
    events = AuditEvent.objects.count()

    response = _client(operator).post(
        f"/admin/approvals/approvalrequest/{request.pk}/approve/",
        {"arg__note": "", "round": 1, "arguments_hash": request.arguments_hash},
    )

    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    request.refresh_from_db()
    assert (request.status, request.round, request.arguments) == (ApprovalStatus.PENDING, 1, {"note": "pay 5000"})
    assert not request.decisions.exists() and AuditEvent.objects.count() == events
    assert not SideEffect.objects.exists()


def test_reject_selected_asks_once_for_a_comment_and_rejects_each_with_it(
    hold: Hold, operator: User, committed: Any
) -> None:
    # given two pending requests
    first, second = hold("a"), hold("b")
    client = _client(operator)
    selected = {"action": "reject_selected", "_selected_action": [first.pk, second.pk]}

    # when the operator picks "Reject selected", the confirmation page lists both and asks for one comment
    page = client.post("/admin/approvals/approvalrequest/", selected).content.decode()
    assert 'id="action-with-comment-form"' in page and 'id="selected-requests"' in page
    assert "Reject 2 request(s)" in page

    # and they confirm with a comment
    response = committed(
        client.post, "/admin/approvals/approvalrequest/", {**selected, "apply": "yes", "comment": "Not this quarter."}
    )

    # then both were rejected with that comment, and the model of each is told so
    assert response.status_code == 302
    for request in (first, second):
        request.refresh_from_db()
        assert request.status == ApprovalStatus.REJECTED
        assert request.decisions.get().comment == "Not this quarter."
        assert request.call.error == "Rejected by operator: Not this quarter."
    assert not SideEffect.objects.exists()


def test_an_operator_of_two_tenants_narrows_the_desk_to_one_and_is_offered_only_their_own(
    hold: Hold, request_call: Any, operator: User
) -> None:
    """An operator of acme and globex works one tenant's queue at a time (review af: no tenant filter on the desk)."""
    from toolhub.models import Tenant, TenantMembership

    globex, _ = Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    Tenant.objects.get_or_create(slug="initech", defaults={"name": "Initech"})
    TenantMembership.objects.create(user=operator, tenant=globex)
    bob = User.objects.create_user("bob", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=bob, tenant=globex)
    acme_request = hold("a")
    globex_call = request_call("risky_effect", {"note": "g"}, bob, tenant="globex")
    globex_request = ApprovalRequest.objects.get(call=globex_call)
    client = _client(operator)

    body = client.get("/admin/approvals/approvalrequest/").content.decode()
    assert sorted(_rows(body)) == sorted([str(acme_request.pk), str(globex_request.pk)])
    assert "?tenant=globex" in body and "?tenant=acme" in body and "initech" not in body

    only_globex = client.get("/admin/approvals/approvalrequest/?tenant=globex").content.decode()
    assert _rows(only_globex) == [str(globex_request.pk)]
