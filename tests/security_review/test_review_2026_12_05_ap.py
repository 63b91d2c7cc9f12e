"""Review of 2026-12-05 (ap): regressions and holes in the newest commits (a0c4d88..a48e13e).

Each test fails on the reviewed code (main at a48e13e) and states who sends what, where, and what is expected.

Findings: since approval rules read the arguments as JSON (``approvals.rules.database_rule_verdict``, b02d7f4), a
condition on a ``datetime`` parameter compared the call's ISO text with the rule's letter by letter, so the model,
which writes the offset and the fraction, chose the answer: ``when < "2026-01-01T00:00:00Z"`` let
``2026-01-01T05:00:00+14:00`` (an instant of 2025) pass, ``when > "2026-06-01T00:00:00Z"`` let
``2026-05-31T23:00:00-12:00`` pass, ``when >= "2026-06-01T00:00:00Z"`` let ``2026-06-01T00:00:00.5Z`` pass; before,
the Python ``datetime`` against text raised ``TypeError`` and every such call was held (now a date-time text is
compared as the instant it names, an instant without an offset against one with it is not ordered and holds the
call: ``approvals.rules._normal``); and ``contains`` over a list compared the rule's value with the list's JSON items
as they are spelt, so ``amounts contains 0`` on a ``list[Decimal]`` (items stored as text, ``"0.00"``) never matched
where the ``Decimal`` items matched before, and ``contains "0"`` was evaded by writing ``0.00`` (now lists and objects
are compared item by item as numbers and instants, as single values already were); since the console's bulk
actions read the ticked rows from the admin's ``get_queryset`` (1999c56), the list's ``list_select_related`` no longer
applied, and the calls' cancel confirmation page read each call's user in a query of its own (now
``toolhub.admin_actions.CommentActionMixin.response_action`` reads the rows with what the list reads with them).

Checked and found holding (no test here): ``approvals.deciders.decider_as_now`` keeps a fresh ``User`` per process
under the governance stamp read after the request's lock; it is only read (its permissions and tenant scope memoized
before it is shared; ``tenant_scope`` depends on no request state; the view's own user still names the decision and
its rows), every table it depends on is watched (memberships, groups, user and group permissions, ``is_active`` and
``is_superuser``), it is never handed back to a caller, and a decision inside another governance scope does not
occur (the admin's, API's and examples' callers open none); the decisions read carrying the stamp costs no round
trip; ``approvals.writes``/``approvals.unanswered`` are a move of the same code (each still locks and checks pending);
``CommentActionMixin.response_action`` reads the ticked rows again from the admin's own ``get_queryset`` (tenant
scoped, ``TenantScopedAdmin`` resolves first in every admin using it) filtered by the ticked ids, and "select all"
still uses the filtered list; the desk's ``TenantFilter`` offers only the viewer's tenants and filters an already
scoped queryset (another tenant's slug lists nothing); ``compensation_settle_refusal`` is used by every path that
settles a compensation (the API's result view, the admin's resolve actions, ``saga_resolve``), the step's user
refused first; ``saga_record_step`` holds a ``needs_attention`` step only under a rollback asked for after it,
within its own tenant's saga; ``export_record`` names only the event's own tenant (tenant filters are dropped from
the recorded query, unknown filters are refused before it); ``_deleted_newest`` counts only whole-trail records made
after the newest acknowledged checkpoint and stays silent on a fresh install (no record names a checkpoint);
``_head_problem`` marks every head disagreement so a moved head is read again, as before.

Not fixed (reported): ``export_record`` reads the tenants of the export before the stream's own query runs, so a
tenant whose first matching calls commit in between is not recorded (a window of one round trip); a whole-trail
verification that read checkpoint #N before an operator deleted it and finishes after the acknowledgement is
counted by ``_deleted_newest`` (records are filtered by ``finished_at``) until a new #N is stored.
"""

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalRule
from tests.helpers import console
from tests.security_review.conftest import client_for
from toolhub import Param, registry, tool
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db


@tool(risk="low")
def ap_schedule_payment(
    amount: Annotated[int, Param("How much, in cents.")],
    when: Annotated[datetime, Param("When the payment leaves, with its offset.")],
) -> str:
    """Schedule a payment."""
    return "scheduled"


@tool(risk="low")
def ap_pay_lines(amounts: Annotated[list[Decimal], Param("The amount of each line.")]) -> str:
    """Pay several lines at once."""
    return "paid"


@pytest.fixture(autouse=True)
def _ap_tools() -> Any:
    with registry.temporarily(ap_schedule_payment, ap_pay_lines):
        yield


def _status(user: User, tool_name: str, arguments: dict[str, Any]) -> str:
    response = client_for(user).post("/api/v1/calls/", {"tool": tool_name, "arguments": arguments}, format="json")
    return str(response.json()["status"])


@pytest.mark.parametrize(
    ("operator", "value", "when"),
    [
        # A backdated payment: 05:00 at +14:00 on 1 January is 15:00 UTC on 31 December.
        ("<", "2026-01-01T00:00:00Z", "2026-01-01T05:00:00+14:00"),
        # A far-off one: 23:00 at -12:00 on 31 May is 11:00 UTC on 1 June.
        (">", "2026-06-01T00:00:00Z", "2026-05-31T23:00:00-12:00"),
        # Half a second past the limit, spelt with a fraction (".5" sorts before "Z").
        (">=", "2026-06-01T00:00:00Z", "2026-06-01T00:00:00.5Z"),
    ],
)
def test_a_rule_on_a_date_time_holds_the_instant_whatever_its_spelling(
    alice: User, operator: str, value: str, when: str
) -> None:
    """Found: the rule ``ap_schedule_payment: when <op> <instant>`` compared the call's ISO text with the rule's
    letter by letter (``to_json_value`` made the ``datetime`` text): the model, which writes the offset and the
    fraction, made an instant the rule covers sort outside it, and the payment was scheduled unapproved. Before the
    arguments were read as JSON, a ``datetime`` against text raised ``TypeError`` and every such call was held.
    Expect: the call is held: date-time texts compare as the instants they name.
    """
    ApprovalRule.objects.create(
        name="window", tool_name="ap_schedule_payment", argument="when", operator=operator, value=value
    )
    assert _status(alice, "ap_schedule_payment", {"amount": 100, "when": when}) == "pending_approval"


def test_a_rule_on_a_date_time_lets_an_instant_outside_it_pass(alice: User) -> None:
    """Found: the same letter-by-letter comparison held ``2025-12-31T23:00:00-02:00`` (1 January, 01:00 UTC) under
    ``when < "2026-01-01T00:00:00Z"``: the rule answered for the spelling, not the instant, either way.
    Expect: an instant after the limit, written with any offset, runs without approval; one written without an
    offset cannot be ordered against the rule's and is held (fails closed, as before the JSON reading).
    """
    ApprovalRule.objects.create(
        name="backdated", tool_name="ap_schedule_payment", argument="when", operator="<", value="2026-01-01T00:00:00Z"
    )
    assert (
        _status(alice, "ap_schedule_payment", {"amount": 1, "when": "2025-12-31T23:00:00-02:00"}) != "pending_approval"
    )
    assert _status(alice, "ap_schedule_payment", {"amount": 1, "when": "2026-01-02T00:00:00"}) == "pending_approval"


@pytest.mark.parametrize("value", [0, "0"])
def test_contains_reads_a_list_of_decimals_as_numbers(alice: User, value: Any) -> None:
    """Found: the rule ``ap_pay_lines: amounts contains 0`` matched while the rules read ``Decimal`` items
    (``0 in [Decimal("0.00")]``); read as JSON the items are text (``["0.00", "5"]``), so it never matched, and
    ``contains "0"`` was evaded by writing ``0.00``: a zero line was paid unapproved.
    Expect: the items of a list compare as numbers, as a single argument's value does: held either way.
    """
    ApprovalRule.objects.create(
        name="zero line", tool_name="ap_pay_lines", argument="amounts", operator="contains", value=value
    )
    assert _status(alice, "ap_pay_lines", {"amounts": ["0.00", 5]}) == "pending_approval"
    assert _status(alice, "ap_pay_lines", {"amounts": [1, "2.50"]}) != "pending_approval"


# --- the console's bulk actions ------------------------------------------------------------------------------


def _cancel_page_queries(client: Any, calls: list[ToolCall]) -> int:
    """The queries of the cancel action's confirmation page for ``calls``, as an operator ticks them."""
    data = {"action": "cancel_selected", "index": "0", "_selected_action": [str(call.pk) for call in calls]}
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/admin/toolhub/toolcall/", data)
    assert response.status_code == 200 and "Cancel calls" in response.content.decode()
    return len(queries)


def test_the_cancel_confirmation_page_costs_no_query_per_call(superuser: User) -> None:
    """Found: since ``CommentActionMixin.response_action`` reads the ticked rows from the admin's ``get_queryset``
    (1999c56) instead of the change list's queryset, the list's ``list_select_related`` no longer applies: the
    cancel action's confirmation page read each call's user in a query of its own (one more per ticked call).
    Expect: the page issues as many queries for six ticked calls as for two.
    """
    users = [User.objects.create_user(f"ap-user-{n}") for n in range(6)]
    calls = [
        ToolCall.objects.create(tool_name="ap_pay_lines", status=CallStatus.QUEUED, tenant="acme", user=user)
        for user in users
    ]
    client = console(superuser)
    assert _cancel_page_queries(client, calls[:2]) == _cancel_page_queries(client, calls)


@pytest.mark.parametrize("value", ["2026-06-01", "2026-06-01T00:00:00", "June 1st"])
def test_a_rule_ordering_a_date_time_by_no_instant_is_refused_where_it_is_entered(value: str) -> None:
    """Found (review as's note): since date-times compare as instants, a rule ``when > "2026-06-01"`` (a date alone)
    or one without an offset cannot be ordered against the call's instant, so it held every call of the tool.
    Expect: it is refused when entered, saying to give the instant with its offset; one with an offset saves.
    """
    from django.core.exceptions import ValidationError

    rule = ApprovalRule(
        name="late payments", tool_name="ap_schedule_payment", argument="when", operator=">", value=value
    )
    with pytest.raises(ValidationError, match="with its offset"):
        rule.full_clean()
    ApprovalRule(
        name="late payments",
        tool_name="ap_schedule_payment",
        argument="when",
        operator=">",
        value="2026-06-01T00:00:00Z",
    ).full_clean()
