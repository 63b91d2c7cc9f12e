"""Review ec (2026-12-06): the review of reviews dr (sweep marks capped by open writes, reopened rollbacks), dv
(transaction pooler) and dy (approval e-mails).

Each finding's test failed on the reviewed code (main at afcc737) and passes now.

Findings:

1. A compensation tool that is itself agentic (a ``SimpleAgenticTool`` named by ``compensate_with``): its inner calls
   took the compensation call's saga id and run (``_outer_row``) as ``kind=inner``, inside ``STEP_KINDS``, so an
   inner call of a compensable tool was recorded as a step of the saga it was undoing and a later rollback (on demand,
   a second failure, the sweep) compensated the compensation's own work. Fixed where a step is decided: a call made
   on behalf of a compensation (its context names the step it ``compensates``; inner calls inherit it, and only the
   sagas set it) is no saga step: ``SAGA_STEPS`` / ``is_saga_step`` (``toolhub.models.calls``) for ``step_calls``,
   ``saga_record_step``, ``saga_ignores`` and the sweep's scans.
2. ``toolhub.W014`` read a bound as set when any of the database's, the role's or the role-in-database settings was
   non-zero: a bounded database with the role in it set to ``0`` (PostgreSQL applies the role-in-database one) passed
   while the pool ran unbounded. Fixed in ``_UNBOUNDED_SQL``: the applied setting by PostgreSQL's precedence.
3. A write transaction that never ends (idle bound 0, a stuck session of another application in the database) held
   the sweep's marks (``marked_batch``) at its start for ever: the ended-steps and unheard-failures scans read
   nothing after it, compensation paused, silently. Fixed: ``oldest_open_write`` returns the session (pid,
   application) and each tick whose mark it holds back past the margin logs a warning naming it (never its query).
4. A refused approver's e-mail was logged with ``logger.exception``: the log carried the refused address (another
   tenant's approver's, in a shared log) and the server's reply. Fixed: ``_failure`` logs the error's type and SMTP
   codes only (``SMTPRecipientsRefused 550``), for the open failure too.

Checked and holding:
- An export or ``audit_export`` holding a long read-only transaction has no ``backend_xid`` (PostgreSQL assigns one
  at the first write): it never caps the marks. The sweeper's own session is excluded by ``pg_backend_pid()``; run
  inside an outer atomic with writes, its own rows are visible to it anyway.
- ``saga_rollback``'s reopened path under two operators at once: ``record_missing_steps`` plans under the saga's row
  lock and ``Compensation.step_call`` is one-to-one, so the late step is planned once (the second request finds it
  taken and ``advance`` starts nothing twice); dr's tests and review dj's race pin the single compensation.
- ``toolhub_db_roles`` sets ``timezone`` to ``connection.timezone_name`` (``UTC`` with ``USE_TZ``, whatever
  ``TIME_ZONE`` says; the database's ``TIME_ZONE`` when set), the value Django compares per session, so no
  ``set_config`` is sent behind the pooler. W014 reads ``0``, ``0ms``, ``0s`` as unbounded and ``'5min'``/``45000``
  as bounded (test 2).
- ``verify_audit --workers`` uses forked processes (``multiprocessing`` ``fork``), not threads: the execute wrapper
  on the connection objects is copied into each child (dv's limit, read from the code).
- ``_send_each`` with the console and locmem backends (demo, tests): ``open()`` returns ``None`` and each
  ``send_messages`` works unopened; escalation e-mails go through the same ``_send_each``; the body is never logged.
"""

import datetime as dt
import logging
import smtplib
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.core.mail import EmailMessage
from django.core.mail.backends import locmem
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from agents_app.services import agent_create
from approvals.notifications import _send_each
from tests.sagas.sample_tools import LOG, book
from tests.security_review.direct_sagas import direct_call
from tests.security_review.pg_races import dsn
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import NothingToCompensateError, saga_rollback_on_demand
from toolhub.tools.registry import registry

UNDO_DESK = SimpleAgenticTool(
    "undo_desk", "Undo a trip, booking a voucher for the traveller.", tools=[book], max_iterations=3, agent="undo-brain"
)


@tool(compensate_with="undo_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result['trip']}"})
def plan_trip(city: str) -> dict[str, Any]:
    """Plan a trip; undone by an agentic desk."""
    LOG.append(("plan", city))
    return {"trip": f"T-{city}"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_compensations_inner_steps_are_never_compensated(alice: User) -> None:
    """Found: an agentic compensation's inner ``book`` call carried the saga id and counted as a step: the saga
    recorded it and a later rollback cancelled the voucher the compensation had booked (a compensation of a
    compensation).
    Expect: the compensation's inner calls are no steps: nothing plans their compensation, not a second rollback
    on demand (nothing to compensate) nor the sweep, and the voucher stays booked."""
    agent_create(
        name="undo-brain",
        provider="scripted",
        script=[{"tool_calls": [{"name": "book", "arguments": {"item": "voucher"}}]}, {"content": "undone"}],
        tools=[],
    )
    with registry.temporarily(plan_trip, *UNDO_DESK.__toolhub_tools__()):
        direct_call("plan_trip", {"city": "oslo"}, saga="trip", user=alice)
        direct_call("explode", {"reason": "boom"}, saga="trip", user=alice)
        undo = Compensation.objects.get(step_call__tool_name="plan_trip")
        assert undo.status == CompensationStatus.SUCCEEDED, undo.status
        inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="book")
        assert inner.status == CallStatus.SUCCEEDED and inner.context["parent_call_id"] == str(undo.call_id)

        with pytest.raises(NothingToCompensateError):
            saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="alice")
        sagas_sweep()

    assert not Compensation.objects.filter(step_call=inner).exists()
    assert ("cancel", "B-voucher") not in LOG, LOG


@pytest.mark.postgres
@pytest.mark.django_db
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_the_pooler_check_reads_the_bound_that_applies_not_any_bound_found() -> None:
    """Found: ``toolhub.W014`` read a bound as set when any of the database's, the role's or the role-in-database
    settings held a non-zero value: the database bounded (``ALTER DATABASE ... SET statement_timeout = '30s'``) and
    the role in it unbounded (``ALTER ROLE ... IN DATABASE ... SET statement_timeout = 0``, which PostgreSQL applies
    over the database's) passed the check while every server connection of the pool ran unbounded.
    Expect: the check reads the setting PostgreSQL applies (role in database, then role, then database) and names
    ``statement_timeout``; the role-in-database ``'0ms'`` reads as unbounded, ``'5min'`` as bounded."""

    def w014() -> list[str]:
        return [message.msg for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"]

    with override_settings(TOOLHUB={**settings.TOOLHUB, "TRANSACTION_POOLER": True}), connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_user), quote_ident(current_database())")
        role, database = cursor.fetchone()
        cursor.execute(f"ALTER DATABASE {database} SET statement_timeout = '30s'")
        cursor.execute(f"ALTER DATABASE {database} SET idle_in_transaction_session_timeout = '5min'")
        cursor.execute(f"ALTER ROLE {role} IN DATABASE {database} SET statement_timeout = '0ms'")
        overridden = w014()
        cursor.execute(f"ALTER ROLE {role} IN DATABASE {database} SET statement_timeout = '5min'")
        bounded = w014()

    assert len(overridden) == 1, overridden
    assert "in this database: statement_timeout: " in overridden[0], overridden
    assert bounded == []


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_transaction_holding_the_sweeps_marks_back_is_named_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """Found: a write transaction that never ends (idle bound 0, a stuck session of another application in the same
    database) capped the sweep's marks at its start for ever: the ended-steps and unheard-failures scans read
    nothing after it, compensation paused, and nothing said so (no log line, no figure).
    Expect: each tick whose marks a transaction holds back past the margin logs a warning naming that session's pid,
    application and how long it has been open (not its query: it may carry anyone's data)."""
    other = psycopg.connect(**dsn(), application_name="stuck-report", autocommit=False)
    try:
        other.execute("SELECT txid_current()")  # holds a transaction id, as a write does
        at = timezone.now() + dt.timedelta(hours=1)
        with pytest.MonkeyPatch.context() as patch, caplog.at_level(logging.WARNING, logger="toolhub.sagas"):
            patch.setattr(timezone, "now", lambda: at)
            sagas_sweep()
    finally:
        other.rollback()
        other.close()

    held = [record.getMessage() for record in caplog.records if "held back" in record.getMessage()]
    assert held, [record.getMessage() for record in caplog.records]
    assert all("stuck-report" in message and "pid " in message for message in held), held
    assert all("txid_current" not in message for message in held), held


class _RefusingBackend(locmem.EmailBackend):
    """A mail server that refuses one recipient (``550``), as SMTP's ``send_messages`` raises it."""

    def send_messages(self, messages: Any) -> int:
        for message in messages:
            if "carol@globex.example" in message.to:
                raise smtplib.SMTPRecipientsRefused({"carol@globex.example": (550, b"5.1.1 no such user")})
        return super().send_messages(messages)


def test_a_refused_approver_address_is_not_written_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """Found: a refused approver's message was logged with ``logger.exception``: the exception's text (and so the
    log line) carried the refused address, another tenant's approver's among them in a shared log, and the mail
    server's reply.
    Expect: the failure is logged with the request, the event and the error's type and SMTP code, never an address
    or the message's body; the other approvers' messages still go out."""
    messages = [
        EmailMessage("Approval needed", "Tool: refund_order", "toolhub@example.com", [address])
        for address in ("carol@globex.example", "dave@acme.example")
    ]
    with (
        override_settings(EMAIL_BACKEND=f"{__name__}._RefusingBackend"),
        caplog.at_level(logging.INFO, logger="approvals"),
    ):
        sent = _send_each(messages, request_id=7, event="approval.requested")

    logged = "\n".join(caplog.text.splitlines())
    assert sent == 1
    assert "approval request 7" in logged and "SMTPRecipientsRefused" in logged, logged
    assert "globex.example" not in logged and "refund_order" not in logged and "no such user" not in logged, logged
