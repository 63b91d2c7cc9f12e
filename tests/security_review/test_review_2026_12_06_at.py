"""Review of 2026-12-06 (at): gaps left by the last session (MCP credential errors, the console's state, W006, W007).

Findings:

1. A remote MCP credential whose environment variable is unset (or refused) failed the call with a message naming
   the variable (``credential_headers``): the model and the MCP caller read what the platform's environment holds.
   Now they read "not configured" with no name; the server log names the server, the tenant and the variable.
2. The audit console said "failed" for a verification that found nothing altered and only could not check
   something (the checkpoint key not set in that process): an auditor could not tell "not proven" from "tampered".
   A record now keeps whether its every problem was ``UNVERIFIABLE`` (``AuditVerification.unverifiable``, judged
   on all problems, not the kept 20) and the console reads "unverifiable" (the whole trail and each tenant's own).
3. ``toolhub.W006`` read grants in no order (``Grant`` has no ``Meta.ordering``): on PostgreSQL a grant updated
   since moved to the end of the heap, so the message named rows in another order (and, past the bound of 25,
   other rows) from one run to the next. Grants and groups are now read by key.
4. ``runs_to_wake``'s "a call of the turn still open" (review n's "found and not fixed"): with a thousand idle
   compensating runs, a hash anti join over a seq scan of every call ever (50 000 rows, each 60 s). A partial index
   of the open calls (``toolcall_open_of_turn``: ``run_id, turn`` where ``kind = 'call'`` and the status is not
   settled, the selector's own condition) is what that anti join now reads; the query is unchanged, so the live
   runs are still read through ``agentrun_to_wake`` (or the status index) and review d's 100 000-row plan holds.
   Its cost: one more index entry per insert or update of a call while it is open (the settled ones are not in it).

Checked and found holding:

- The model provider's path (``adapter_for``) already logs the variable and tells the model only "not configured"
  (review m); the remote server sync's ``last_error`` (admin, operators) carries the same sanitized text, and the
  credential's admin page lists its variable for the operators who may see it.
- W007 names the refused variable and why: the name only (``credential_env_problem`` never reads the value), the
  rows by key (``order_by("pk")``), bounded by ``reference_warnings`` (25 named, the rest counted); the distinct
  names it judges are one query per field. W001/W003/W005 iterate the registry (sorted by ``registry``'s own
  order, one message per tool, bounded by the code); W002 names the preset's variable, never its value; W004 says
  the key is unset/short/equal to ``SECRET_KEY`` without printing it.
- Records of verifications kept before this change read "failed" as they did (``unverifiable`` defaults to False):
  an old failure is never softened to "unverifiable" after the fact.
"""

import logging
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents_app.selectors import runs_to_wake
from tests.audit.conftest import append_events, owner_tampering
from tests.security_review.query_plans import explained, seq_scans
from tests.security_review.test_review_2026_12_06_n import rolled_back_runs  # noqa: F401 (a fixture)
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.exceptions import ToolError
from toolhub.models import AuditEvent, AuditVerification, Grant
from toolhub.references import MAX_REFERENCE_WARNINGS

pytestmark = pytest.mark.django_db

VARIABLE = "CRM_MCP_TOKEN_REVIEW_AT"


def test_an_unset_mcp_credential_is_named_to_the_operators_not_the_caller(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: the call failed "environment variable 'CRM_MCP_TOKEN_...' is unset or refused", to the model and the
    MCP caller alike.
    Expect: the caller reads "not configured" with no variable; the server log names the variable for operators."""
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer
    from toolhub.mcp_client.services import credential_headers

    monkeypatch.delenv(VARIABLE, raising=False)
    server = RemoteMcpServer.objects.create(name="crm", url="https://crm.example/mcp")
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env=VARIABLE)

    with caplog.at_level(logging.ERROR), pytest.raises(ToolError, match="not configured") as refused:
        credential_headers(server, "acme")

    assert VARIABLE not in str(refused.value) and "'crm'" in str(refused.value)
    assert any(VARIABLE in record.getMessage() for record in caplog.records)


def _verify() -> None:
    with pytest.raises(CommandError):
        call_command("verify_audit", "--no-progress", stdout=StringIO(), stderr=StringIO())


def test_a_verification_that_only_could_not_check_reads_unverifiable(
    monkeypatch: pytest.MonkeyPatch, admin_client: Client
) -> None:
    """Found: with the checkpoint key unset where ``verify_audit`` ran (nothing altered), the console read
    "Audit trail: failed", as for a rewritten event.
    Expect: "unverifiable" on the console and in every record of that run; a rewritten event still reads "failed"."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "review-at-key")
    events = append_events(3)
    audit_checkpoint_create()
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")

    _verify()

    page = admin_client.get("/admin/toolhub/auditevent/").content.decode()
    assert "Audit trail: unverifiable" in page and "Audit trail: failed" not in page
    records = list(AuditVerification.objects.all())
    assert records and {record.state for record in records} == {"unverifiable"}

    with owner_tampering():
        AuditEvent.objects.filter(pk=events[1].pk).update(event_type="test.other")
    _verify()

    assert AuditVerification.objects.filter(tenant="").latest().state == "failed"
    assert "Audit trail: failed" in admin_client.get("/admin/toolhub/auditevent/").content.decode()


@pytest.mark.postgres
def test_w006_names_the_same_rows_in_the_same_order_after_an_update() -> None:
    """Found: W006 read grants unordered; a grant updated since (a new heap tuple, at the end) was named last, so
    its message changed from one run to the next.
    Expect: the rows in key order whatever was updated, so the same 25 are named past the bound."""
    from toolhub.database_checks import check_governance_references

    assert connection.vendor == "postgresql"
    grants = [
        Grant.objects.create(tool_name=f"gone_tool_{index:02d}", agent_name="bot")
        for index in range(MAX_REFERENCE_WARNINGS + 2)
    ]
    Grant.objects.filter(pk=grants[0].pk).update(note="edited since")

    named = [message.obj for message in check_governance_references(databases=["default"]) if message.obj]

    assert named == [f"Grant {str(grant)!r}" for grant in grants[:MAX_REFERENCE_WARNINGS]]


@pytest.mark.postgres
@pytest.mark.usefixtures("rolled_back_runs")
def test_runs_to_wake_reads_the_open_calls_through_an_index() -> None:
    """Found: with a thousand idle compensating runs, "a call of the turn still open" was a hash anti join over a
    seq scan of every call ever (50 000 rows), each 60 s.
    Expect: the same runs (none here), the open calls read through an index, the live runs through theirs."""
    assert runs_to_wake(idle_since=timezone.now()) == []
    [(_, plan)] = explained(lambda: runs_to_wake(idle_since=timezone.now()))
    assert not seq_scans(plan) and "toolcall_open_of_turn" in plan, plan
    assert re.search(r"(Index Scan using|Bitmap Index Scan on) (agentrun_to_wake|agents_app_agentrun_status_\w+)", plan)
