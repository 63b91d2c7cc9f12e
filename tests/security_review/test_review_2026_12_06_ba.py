"""Review of 2026-12-06 (ba): review the review of aq, at, ao and aw (fixes merged this hour).

Findings:
- With the checkpoint key unset where ``verify_audit`` ran, deleted stored checkpoints (a gap in their numbering,
  or the newest ones an earlier run compared with) were not reported at all, and the run read "unverifiable"
  (review at's new state): ``stored_run`` finds the gap with no key, but the ``CheckpointKeyError`` its signature
  check raises next dropped it. Evidence of tampering that needs no key is now kept (``TAMPERED``) beside the
  "cannot verify" problem, so the console reads "failed".
- Same run: the stored checkpoints' missing key also skipped ``AUDIT_CHECKPOINT_DIR``, so a newest checkpoint file
  that cannot be read (overwritten) went unreported. Each source is now checked on its own (``audit_trail_verify``).

Checked and found holding (no test here):
- ``nameable_tool_names``' ``replace(principal, agent_tools=every name)`` is used only to name tools on an agent
  and to read them (``_tools_nameable_by``, ``CallerView.tools_seen``), never to authorize a call: a run's
  principal carries the agent's own tools, and the worker authorizes again. With every name as "the agent's",
  only navigation tools pass on the agent's say (``authorization._verdict``); leaves still need the person's
  grant, so a guide counts only through what they may call. The playbook's and state machine's guide calls
  list members through ``granted_for`` (``usable_in_call``); their status lines name no member the run did not
  call itself.
  ``tool_seen_by_any`` returns a playbook's tool whole when one principal may use it (no categories to narrow).
- ``toolcall_open_of_turn``: its condition is ``sorted(SETTLED_STATUSES)``, so a status added later changes the
  model's index and ``makemigrations --check`` (the lint step) fails until a migration follows; PostgreSQL proves
  the implication of ``NOT IN`` lists element by element, whatever the order ``list(SETTLED_STATUSES)`` gives.
- MCP credential errors: ``credential_headers`` is the one place the variable is read for remote MCP (calls, the
  admin's fetch and ``sync_tools`` store its sanitized ``ToolError`` text); a code tool's missing ``Secret`` preset
  reaches the model as ``default_error_handler``'s fixed text (its name only in the auditors' detail).
- ``db_app_roles_refresh``: a no-op off PostgreSQL; it skips audit tables not (yet) migrated and renews default
  privileges only for owners the migrating role belongs to; a role with only SELECT defaults (a reporting role)
  is not picked. Not fixed: a role set up outside toolhub with all four data defaults IN SCHEMA (an ETL writer) is
  picked too and gets CONNECT and data rights on every existing table at each migrate (see the report).
- ``visible_line``: every character ``str.splitlines`` breaks on (``\\r``, ``\\n``, ``\\x0b``, ``\\x0c``,
  ``\\x1c-\\x1e``, ``\\x85``, U+2028, U+2029) is Cc/Zl/Zp and written out by ``visible_text``; a lone ``\\r`` too.
  The approval e-mail is the only e-mail toolhub sends (no other ``EmailMessage``/``send_mail``); the escalation
  e-mail is the same ``_body``; webhooks carry JSON (line breaks escaped by the encoder).
- ``AuditVerification.unverifiable`` is judged on every problem (not the kept 20): one ``TAMPERED`` among many
  ``UNVERIFIABLE`` ones reads "failed"; per-tenant records get the shared (chainless) problems plus their own, so
  a tenant with a rewritten chain reads "failed" while another with only the key missing reads "unverifiable".
"""

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.audit.conftest import append_events, owner_tampering
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditCheckpoint, AuditVerification, Tenant

pytestmark = pytest.mark.django_db


def _verify() -> None:
    with pytest.raises(CommandError):
        call_command("verify_audit", "--no-progress", stdout=StringIO(), stderr=StringIO())


def test_deleted_checkpoints_read_failed_when_the_key_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: stored checkpoint #2 deleted, then ``verify_audit`` run where the key is unset: the record kept only
    "cannot verify: the checkpoint key is not configured" and read "unverifiable".
    Expect: the gap in the numbering is reported (it needs no key) and the run reads "failed", the whole trail's
    record and the tenant's alike."""
    Tenant.objects.create(slug="acme", name="ACME")
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "review-ba-key")
    for _ in range(3):
        append_events(2)
        audit_checkpoint_create()
    assert list(AuditCheckpoint.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]
    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=2).delete()
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")

    _verify()

    whole = AuditVerification.objects.filter(tenant="").latest()
    assert whole.state == "failed", whole.problems
    assert "stored checkpoint #2 is missing" in whole.problems and "cannot verify" in whole.problems
    assert AuditVerification.objects.filter(tenant="acme").latest().state == "failed"


def test_an_unreadable_checkpoint_file_reads_failed_when_the_key_is_unset(
    monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Path
) -> None:
    """Found: with stored checkpoints and ``AUDIT_CHECKPOINT_DIR``, the key unset: the stored checkpoints' missing key
    skipped the directory too, so a newest checkpoint file overwritten with garbage went unreported ("unverifiable").
    Expect: the file that cannot be read is reported (no key needed to see it) and the run reads "failed"."""
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "review-ba-key")
    append_events(2)
    audit_checkpoint_create()
    newest = sorted(tmp_path.iterdir())[-1]
    newest.write_text("not json")
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")

    _verify()

    whole = AuditVerification.objects.filter(tenant="").latest()
    assert whole.state == "failed", whole.problems
    assert f"checkpoint file {newest.name}: cannot be read" in whole.problems and "cannot verify" in whole.problems
