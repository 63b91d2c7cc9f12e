"""Review of 2026-12-04 (d): regressions and new holes of the day's security fixes.

Call id normalisation in the agent loop (``agents_app.model_answers``) and the bounded count for tenant
staff in the admin lists (``toolhub.admin_lists.EstimatedCountPaginator``).
"""

import hashlib

import pytest
from django.contrib.auth.models import Group

from agents_app.model_answers import storable_turn
from agents_app.models_adapters import ModelToolCall, ModelTurn
from tests.audit.test_console import _catalogue, auditors, make_call, member  # noqa: F401 - fixtures
from tests.helpers import console
from toolhub.admin_audit import ToolCallAdmin


def test_a_derived_call_id_never_repeats_an_id_kept_before_it_in_the_turn() -> None:
    """Found: ``_call_ids`` derives ``call_<position>_<sha256[:24]>`` for a repeated id without checking the
    derived id against the ids already kept: a model (or provider) whose second call id is that derived text
    gets two calls with one id in the conversation and the call rows, so a result is matched to the wrong call.

    Expect: every call id of a stored turn is unique, whatever ids the model sent.
    """
    derived = "call_2_" + hashlib.sha256(b"2:a").hexdigest()[:24]
    turn = ModelTurn(
        tool_calls=(
            ModelToolCall(id="a", name="add", arguments="{}"),
            ModelToolCall(id=derived, name="add", arguments="{}"),
            ModelToolCall(id="a", name="add", arguments="{}"),
        )
    )

    ids = [call.id for call in storable_turn(turn).tool_calls]

    assert len(set(ids)) == len(ids), ids


def test_a_tenants_auditor_can_open_every_page_of_a_list_counted_past_its_bound(
    monkeypatch: pytest.MonkeyPatch,
    auditors: Group,  # noqa: F811 - fixture
) -> None:
    """Found: for a viewer who does not see every tenant, ``EstimatedCountPaginator.count`` is now a
    ``BoundedCount`` of at most ``EXACT_COUNT_LIMIT + 1`` rows (the planner's estimate is only for who sees
    every tenant), and Django's paginator refuses any page past it: the admin answers a later page with a
    redirect to ``?e=1``, so a tenant's auditor can no longer reach the rows past the bound (on PostgreSQL
    they could before, through the estimate).

    Expect: the page holding the list's last rows opens (200) and shows them.
    """
    # given acme has 5 calls, lists are counted exactly up to 3 rows and show 2 rows a page
    auditor = member("aud", "acme", auditors)
    for _ in range(5):
        make_call("acme")
    monkeypatch.setattr("toolhub.admin_lists.EXACT_COUNT_LIMIT", 3)
    monkeypatch.setattr(ToolCallAdmin, "list_per_page", 2)

    # when acme's auditor opens the third page (the fifth call)
    response = console(auditor).get("/admin/toolhub/toolcall/?p=3")

    # then it is shown, as the first two pages are
    assert response.status_code == 200, response.get("Location")
