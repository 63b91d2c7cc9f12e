"""Review of 2026-12-05 (y): the tamper-evident audit trail as an attacker with database write access and an auditor.

Each test fails on the reviewed code (main at a0c4d88) and states who reaches what, where ("Found: ...") and
what is expected ("Expect: ...").

Findings:

1. A stored checkpoint row (the application's role may INSERT them) or a checkpoint file whose signature holds
   a non-ASCII character made ``hmac.compare_digest`` raise ``TypeError`` in ``checkpoint_signature``: every
   ``verify_audit`` ended in a traceback, the console's "Verify now" recorded nothing (its auditors kept
   reading the last "verified"), and beat's checkpoint task crashed instead of refusing. Signatures are now
   compared as bytes; such a row or file reads as forged.
2. When an intact chain disagreed with its head, ``verify_audit`` always said "the newest events were
   removed" and named no event: also for forged events appended past the head (the opposite of a removal)
   and for a newest event replaced under an unchanged head. It now names the first event past the head, or
   the replaced one, and says which it is (``audit_verify._head_problem``).
3. Rolling the trail back to an older checkpoint (deleting the newest stored checkpoints and the tail they
   signed, the heads set back) left no gap in the numbering: ``verify_audit`` passed and beat signed on,
   though the append-only record of the last ``verify_audit`` run names the newer checkpoint it compared
   with. A checkpoint a recorded whole-trail run compared with, numbered past every stored one, is now a
   numbering problem (``checkpoint_checks._deleted_newest``), until a person acknowledges it.

Checked and found holding (no test here): the hash covers every column an auditor reads of an event (chain,
seq, event type, call and run ids, tool, status, tenant, actor, time to the microsecond, data, previous hash;
not the database id, which is a row number); reordering (seq swapped), moving an event to another chain or
tenant, a deleted middle event, a truncated tail (with a signed checkpoint), a wiped or replaced chain, a
forged or altered checkpoint and a gap in their numbering are all reported naming the chain. PostgreSQL's
hash (finished in SQL) equals Python's for floats (0.1, 1e308, -0.0, 5e-324, NaN, Infinity), integers of 300
digits and beyond 2**64, nested keys in any order, integer keys, Decimal/datetime/UUID/tuple values, every
control character, ``\\u0000`` spelled out, U+2028/U+FEFF/U+10FFFF and a 200,000-character string (the
data is hashed as the text stored, never re-serialized). Twelve threads on their own connections appending
at once to one fresh chain (first-insert race on the head's upsert included), five rounds: no gap, no fork,
the head at the last seq, the trail verifies. Auditors hold view permissions only: their console writes
nothing but the export's ``calls.exported`` event and a rate-limited verification record.

Not fixed (limits): an owner who deletes the verification records too is caught only by copies kept outside
the database (``AUDIT_CHECKPOINT_DIR``, ``audit_checkpoint -o``), as the README says. A call's page
re-verifies its events and their neighbours' links, so an event of the call rewritten to another call id (its
stored hash left) simply drops out of the page's timeline; only ``verify_audit`` catches that.
"""

import json
import logging
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.audit.conftest import (
    acknowledge_checkpoint,
    append_events,
    cut_chain_tail,
    owner_tampering,
    verify_audit_fails,
)
from toolhub.audit_hash import compute_hash
from toolhub.checkpoints import CheckpointRefusedError, audit_checkpoint_create
from toolhub.models import AuditCheckpoint, AuditEvent, AuditVerification, Tenant
from toolhub.tasks import audit_checkpoint_task, audit_verify_tenant_task

pytestmark = pytest.mark.django_db

#: A signature as a database writer might plant it: 64 characters, not all ASCII.
_PLANTED = "é" * 64


def test_a_planted_checkpoint_with_a_non_ascii_signature_is_reported_as_forged_not_a_crash(
    audit_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: someone with the application's database role inserts checkpoint #2 (numbered after the newest, as
    the trigger allows) with a signature of 64 "é". ``trusted_body`` called ``hmac.compare_digest`` on two
    ``str``, which raises ``TypeError`` for non-ASCII text: ``verify_audit`` ended in a traceback, the console's
    Verify now task recorded no result (acme's auditors kept reading the previous "verified") and beat's
    checkpoint task raised instead of refusing.
    Expect: the checkpoint reads as forged: ``verify_audit`` fails naming it, acme's verification is recorded
    as failed with that problem, and beat refuses to sign (logged as an error), as for any forged checkpoint.
    """
    Tenant.objects.get_or_create(slug="acme", defaults={"name": "Acme"})
    append_events(3)
    audit_checkpoint_create()
    AuditCheckpoint.objects.create(
        seq=2, created_at=timezone.now(), body='{"heads":{},"seq":2}', signature=_PLANTED, acknowledged=True
    )

    assert "stored checkpoint #2: signature does not match" in verify_audit_fails()

    audit_verify_tenant_task("acme")  # what Verify now runs on a worker
    record = AuditVerification.objects.filter(tenant="acme").latest("finished_at")
    assert not record.ok
    assert "stored checkpoint #2: signature does not match" in record.problems

    with caplog.at_level(logging.ERROR, logger="toolhub.tasks"):
        audit_checkpoint_task()  # beat
    assert "Audit checkpoint refused" in caplog.text
    assert AuditCheckpoint.objects.count() == 2


def test_a_checkpoint_file_with_a_non_ascii_signature_is_reported_as_forged(audit_key: str, tmp_path: Path) -> None:
    """Found: a checkpoint document (``verify_audit --checkpoint FILE``, or the newest copy in
    ``AUDIT_CHECKPOINT_DIR``) whose ``signature`` holds a non-ASCII character stopped ``verify_audit`` with a
    ``TypeError`` traceback (``signed_body``) instead of a verdict.
    Expect: "the checkpoint: signature does not match", like any forged document.
    """
    append_events(2)
    document = audit_checkpoint_create(full=True)
    path = tmp_path / "exported.json"
    path.write_text(json.dumps({**document, "signature": _PLANTED}), encoding="utf-8")

    assert "the checkpoint: signature does not match" in verify_audit_fails("--checkpoint", str(path))


def _forged_after(event: AuditEvent, **changes: object) -> AuditEvent:
    """An event chained onto ``event`` as the application would write it, with ``changes``; not yet saved."""
    forged = AuditEvent(
        chain=event.chain,
        seq=event.seq + 1,
        event_type=event.event_type,
        call_id=event.call_id,
        run_id=event.run_id,
        tool_name=event.tool_name,
        status=event.status,
        tenant=event.tenant,
        actor=event.actor,
        created_at=event.created_at,
        data=event.data,
        prev_hash=event.hash,
    )
    for name, value in changes.items():
        setattr(forged, name, value)
    forged.hash = compute_hash(forged)
    return forged


def test_events_forged_past_the_chain_head_are_named_not_reported_as_removed() -> None:
    """Found: someone with the owner's rights appends two forged, correctly chained events to a chain
    (``approval.approve`` by an operator) without moving its head. ``verify_audit`` reported
    "chain head says seq 3: the newest events were removed", naming no event: the auditor looks for
    events that are gone while two forged ones sit in the trail.
    Expect: the problem names the first event past the head (its id and seq) and says it lies beyond it.
    """
    kept = append_events(3)
    first = _forged_after(kept[-1], event_type="approval.approve", actor="operator:bob", data='{"forged":1}')
    second = _forged_after(first, data='{"forged":2}')
    with owner_tampering():
        first.save()
        second.save()

    message = verify_audit_fails()

    assert f"event #{first.pk} (seq 4)" in message
    assert "lie beyond it" in message
    assert "removed" not in message


def test_a_replaced_newest_event_is_named_not_reported_as_removed() -> None:
    """Found: someone with the owner's rights deletes a chain's newest event and writes another in its place
    (same seq, correctly chained, other data), leaving the head. ``verify_audit`` said "the newest events were
    removed" and named no event, though nothing is missing and the replacement is the one to look at.
    Expect: the problem names the replacing event and says the newest event is not the one the head names.
    """
    kept = append_events(3)
    replacement = _forged_after(kept[1], data='{"index":3,"amount":"0.01"}')
    with owner_tampering():
        AuditEvent.objects.filter(pk=kept[2].pk).delete()
        replacement.save()

    message = verify_audit_fails()

    assert f"event #{replacement.pk} (seq 3)" in message
    assert "not the one its chain head names" in message
    assert "removed" not in message


def test_the_newest_events_cut_are_still_reported_as_removed() -> None:
    """Found: nothing (the message the two tests above refine must stay for a real truncation).
    Expect: events cut from the end with the head left says "the newest events were removed".
    """
    events = append_events(4)
    with owner_tampering():
        AuditEvent.objects.filter(pk__in=[events[2].pk, events[3].pk]).delete()

    assert "chain head says seq 4: the newest events were removed" in verify_audit_fails()


def test_the_newest_checkpoints_deleted_with_the_tail_they_signed_are_reported(audit_key: str) -> None:
    """Found: someone with the owner's rights rolls the trail back to checkpoint #1: deletes the newest stored
    checkpoint (#2) and the events it signed, and sets the head back. The numbering has no gap (#1 is the
    newest), #1's heads hold, so ``verify_audit`` passed and beat signed the rolled-back trail, though the
    nightly ``verify_audit`` had recorded that it compared the trail with #2 (append-only records).
    Expect: ``verify_audit`` fails naming stored checkpoint #2 as missing and beat refuses, until a person
    acknowledges it; then beat signs again and the trail verifies.
    """
    events = append_events(2)
    audit_checkpoint_create()
    events += append_events(2, events[0].call_id)
    audit_checkpoint_create()
    call_command("verify_audit", "--no-progress", "--workers", "1", stdout=StringIO(), stderr=StringIO())  # nightly

    cut_chain_tail(events[1], events[2], events[3])
    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=2).delete()

    assert "stored checkpoint #2 is missing (verify_audit compared the trail with it on" in verify_audit_fails()
    with pytest.raises(CheckpointRefusedError):
        audit_checkpoint_create()  # beat

    acknowledge_checkpoint("investigated: incident 51")
    append_events(1)
    audit_checkpoint_create()  # beat signs on
    out = StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", stdout=out, stderr=StringIO())
    assert "every chain intact" in out.getvalue()


def test_a_verification_passes_on_an_untouched_trail_with_every_check() -> None:
    """Found: nothing; the intact case the fixes must not break.
    Expect: ``verify_audit`` passes and says every chain is intact.
    """
    append_events(3)
    out = StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", stdout=out, stderr=StringIO())
    assert "every chain intact" in out.getvalue()
