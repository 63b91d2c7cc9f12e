"""Review of 2026-12-06 (s): reviews j (wait slots, bounded login attempts, docs page) and p (who asked a rollback).

Findings (fail on ba19785, pass after the fix):
- ``toolhub.api.wait_slots`` counted a user's ``?wait=`` long-polls in one cache key whose life began with the first
  wait and was never renewed: it expired under waits still holding it, new waits were counted afresh from 0, and the
  old ones' releases then counted the fresh key below zero, each cycle adding ``CALL_WAITS_PER_USER`` to what one
  user holds (a user always waiting held 4 workers after 90 s, 6 after 180 s, ...). Each slot is now its own key.
  The README said the count was shared across processes; it is only with ``DJANGO_CACHE_URL`` (now said).
- ``compensation_asked_by`` (review p) found who rolled a saga back by the name in the rollback's ``requested_by``
  text when each compensation's approval was asked for, newest step first, one after another: renamed meanwhile,
  they approved the older steps' compensations alone, and a new account given their old name was barred instead.
  The rollback now keeps them as a user (``Rollback.asked_by``, SET_NULL as ``ApprovalRequest.requested_by``; the
  text keeps the name for the trail); the migration reads earlier rows' ``user:<username>`` as that account.

Checked and holds:
- a wait's slot is given back when the wait raises (the ``finally``), and a slot left by a killed process frees
  itself after ``CALL_WAIT_MAX_SECONDS`` + 60 s; ``add`` is atomic in LocMem and Redis (``SET NX``).
- the in-process adapters' waits (LangGraph, OpenAI Agents, Pydantic AI) run in the developer's own process and hold
  no web worker; MCP's follow is ``call_wait_async`` (sleeps in the event loop, a thread only per read): neither
  should share the API's cap.
- ``BoundedAttemptsHandler`` only adds a trim after ``AxesDatabaseHandler.user_login_failed``: the lockout, the
  lockout signal (the audit event), reset on success (``user_logged_in`` is not overridden) and the project's
  ``AXES_LOCKOUT_PARAMETERS`` (username, address) are axes' own; the trim finds the row by the key axes wrote it
  under (``get_client_username``, ``axes_ip_address``, ``axes_user_agent``) and is one UPDATE of the row, so
  concurrent failures (serialized per pair by ``login_guard``, row-locked on PostgreSQL otherwise) each read the
  latest text; between axes' commit and the trim the row holds at most one attempt's text more than the bound.
- ``/api/docs/`` answers GET and HEAD only (review j's test).
- ``asked_by`` is refused by ``approval_may_decide`` (every deciding path: API, change page, bulk actions) and left
  out of ``approvers_of`` (the desk's "May still approve" and the approvers' e-mail); the admin shows it under
  "Who asked". Every rollback a person asks for (``POST /api/v1/sagas/{id}/rollback/``, ``POST /api/v1/runs/{id}/
  rollback/`` with its subagents' sagas) passes the user; the sweeper's and a failed step's rollbacks have none.
"""

from collections.abc import Iterator
from contextlib import ExitStack
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.core.cache.backends import base as cache_base
from django.core.cache.backends import locmem
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest
from approvals.selectors import approvers_of
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub import Param, registry, tool
from toolhub.api.wait_slots import wait_slot
from toolhub.conf import toolhub_settings
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Rollback


@pytest.fixture
def cache_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The local-memory cache's clock, moved by hand (its expiry reads ``time.time``)."""
    now = [1_000_000.0]
    clock = SimpleNamespace(time=lambda: now[0])
    monkeypatch.setattr(locmem, "time", clock)
    monkeypatch.setattr(cache_base, "time", clock)
    cache.clear()
    yield now
    cache.clear()


def test_a_user_who_keeps_waiting_never_holds_more_than_the_cap(cache_clock: list[float]) -> None:
    """Found: the user's one wait count lived ``CALL_WAIT_MAX_SECONDS`` + 60 s from the first wait, renewed by none:
    waits taken just before it expired still held their slots when it did, and the next waits were counted from 0,
    so one user held twice the cap (then, their releases counting the new key below zero, three times, ...).
    Expect: however waits follow each other, one user holds at most ``CALL_WAITS_PER_USER`` at once."""
    settings = toolhub_settings()
    cap, longest = settings.CALL_WAITS_PER_USER, settings.CALL_WAIT_MAX_SECONDS
    with wait_slot(7001) as free:  # a first wait, long over before the next ones
        assert free
    cache_clock[0] += longest + 55
    with ExitStack() as holding:
        assert all(holding.enter_context(wait_slot(7001)) for _ in range(cap))
        cache_clock[0] += 10  # both still well within the longest wait
        more = [holding.enter_context(wait_slot(7001)) for _ in range(cap)]
        assert more == [False] * cap
    assert all(holding.enter_context(wait_slot(7001)) for _ in range(cap)), "the slots were given back"


def test_a_wait_that_raises_gives_its_slot_back(cache_clock: list[float]) -> None:
    """Found: nothing (holds). Expect: a wait ending in an error frees its slot; a slot never given back (a killed
    process) frees itself once the longest wait and a minute have passed."""
    cap = toolhub_settings().CALL_WAITS_PER_USER
    for _ in range(cap + 1):
        with pytest.raises(RuntimeError), wait_slot(7002) as free:
            assert free
            raise RuntimeError("the wait failed")
    leaked = [wait_slot(7003) for _ in range(cap)]
    assert all(slot.__enter__() for slot in leaked)
    with wait_slot(7003) as free:
        assert not free
    cache_clock[0] += toolhub_settings().CALL_WAIT_MAX_SECONDS + 61
    with wait_slot(7003) as free:
        assert free


@tool(risk="high")
def review_s_void_invoice(invoice: Annotated[str, Param("The invoice to void.")]) -> dict:
    """Void an invoice (high risk: an operator approves it)."""
    return {"voided": invoice}


@tool(
    risk="low",
    compensate_with="review_s_void_invoice",
    compensation_mapping=lambda arguments, result: {"invoice": arguments["invoice"]},
)
def review_s_issue_invoice(invoice: Annotated[str, Param("The invoice to issue.")]) -> dict:
    """Issue an invoice."""
    return {"issued": invoice}


@pytest.fixture
def invoice_tools() -> Iterator[None]:
    with registry.temporarily(review_s_void_invoice, review_s_issue_invoice):
        yield


def _held_undo(invoice: str) -> ApprovalRequest:
    undo = ToolCall.objects.get(kind=CallKind.COMPENSATION, arguments={"invoice": invoice})
    assert undo.status == CallStatus.PENDING_APPROVAL
    return ApprovalRequest.objects.get(call=undo)


@pytest.mark.django_db
def test_who_rolled_back_stays_barred_under_a_new_name_and_their_old_name_bars_nobody(
    invoice_tools: None, alice: User, tenant: Tenant, roles: dict[str, Group], django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a compensation's ``asked_by`` was found by the name in the rollback's ``requested_by`` text
    (``user:<username>``) when its approval was asked for, which for a saga's older steps is after the newer ones'
    compensations ran: the operator who rolled back, renamed meanwhile, approved the older step's compensation
    alone, and the new account given their old name was barred from it instead.
    Expect: the rollback keeps who asked for it as a user (``Rollback.asked_by``); every compensation's request
    bars that user, whatever their name is now, and nobody else."""
    operators = (roles["operators"],)
    rolled_by = make_user("acme-operator-s", tenant=tenant, staff=True, groups=operators)
    other = make_user("acme-operator-s2", tenant=tenant, staff=True, groups=operators)
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).post("/api/v1/sagas/", {"saga_id": "inv-s1"}, format="json").status_code == 201
        for invoice in ("I-1", "I-2"):
            step = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "review_s_issue_invoice", "arguments": {"invoice": invoice}, "saga_id": "inv-s1"},
                format="json",
            )
            assert step.status_code in (200, 201, 202), step.content
    assert set(ToolCall.objects.filter(saga_id="inv-s1").values_list("status", flat=True)) == {CallStatus.SUCCEEDED}
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(rolled_by).post("/api/v1/sagas/inv-s1/rollback/", format="json").status_code == 202
    newer = _held_undo("I-2")
    assert list(newer.askers.values_list("pk", flat=True)) == [rolled_by.pk]

    rolled_by.username = "acme-operator-s-renamed"
    rolled_by.save(update_fields=["username"])
    heir = make_user("acme-operator-s", tenant=tenant, staff=True, groups=operators)
    with django_capture_on_commit_callbacks(execute=True):
        approved = client_for(other).post(f"/api/v1/approvals/{newer.pk}/approve/", {"round": 1}, format="json")
    assert approved.status_code == 200, approved.content
    older = _held_undo("I-1")
    askers = list(older.askers.values_list("pk", flat=True))
    assert askers == [rolled_by.pk], f"asked by {askers}, not who rolled back"
    assert rolled_by not in approvers_of(older) and heir in approvers_of(older)
    own = client_for(rolled_by).post(f"/api/v1/approvals/{older.pk}/approve/", {"round": 1}, format="json")
    assert own.status_code == 403, own.content


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_keeps_who_asked_for_earlier_rollbacks(alice: User, operator: User) -> None:
    """Found: (the fix's upgrade) rollbacks asked for before ``Rollback.asked_by`` name their person only as text.
    Expect: the migration reads ``user:<username>`` as that account, leaves an automatic rollback's actor and an
    unknown name unset, so a compensation still to be approved stays barred to who asked for it."""
    before = ("sagas", "0004_rollback_unfinished")
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([before])
    old = MigrationExecutor(connection).loader.project_state(before).apps
    saga = old.get_model("sagas", "Saga").objects.create(key="inv-s-upgrade", tenant="acme")
    rollbacks = old.get_model("sagas", "Rollback").objects
    asked = {
        text: rollbacks.create(saga=saga, trigger="on_demand", requested_by=text).pk
        for text in (f"user:{operator.username}", "saga-sweeper", "user:nobody-by-that-name", "user:")
    }
    MigrationExecutor(connection).migrate(latest)
    kept = dict(Rollback.objects.filter(pk__in=asked.values()).values_list("requested_by", "asked_by"))
    assert kept == {
        f"user:{operator.username}": operator.pk,
        "saga-sweeper": None,
        "user:nobody-by-that-name": None,
        "user:": None,
    }
