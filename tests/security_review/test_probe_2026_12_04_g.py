"""Probe of 2026-12-04 (g): audit integrity against a database writer, request forgery, approvals, cheap DoS.

Each test is an attack that worked on the code as probed, now refused (its docstring says how it worked): a
checkpoint is signed only while the trail still matches the checkpoints signed before (``CheckpointRefusedError``)
and a checkpoint file is never overwritten; an argument spelled ``sNaN`` against a numeric rule is not a 500.
"""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from approvals.models import ApprovalRule
from tests.audit.conftest import (
    append_events,
    cut_chain_tail,
    keys_in_distinct_chains,
    owner_tampering,
    verify_audit_fails,
)
from toolhub.checkpoints import CheckpointRefusedError, audit_checkpoint_create
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", ["delta", "full"])
def test_the_next_beat_checkpoint_does_not_sign_away_a_truncated_chain(audit_key: str, kind: str) -> None:
    """An owner (triggers off) cuts a chain's newest events and rewinds its head; verify_audit catches it, per
    the stored checkpoint. Five minutes later beat signs the next checkpoint from the heads as they are now:
    a delta names the rewound head as "moved" (``_named`` lets a later checkpoint's head win), a full one simply
    names it; verify_audit compares only with the newest run, so the truncation verifies intact from then on.
    (toolhub/checkpoints.py ``audit_checkpoint_create``/``_delta``: no check of the previous run before signing.)
    """
    first, second = keys_in_distinct_chains(2)
    a = append_events(4, first)
    append_events(2, second)
    audit_checkpoint_create()

    cut_chain_tail(a[1], a[2], a[3])  # the owner deletes two events and rewinds the head
    assert "the tail was truncated" in verify_audit_fails()  # caught now ...

    with pytest.raises(CheckpointRefusedError, match="the tail was truncated"):
        audit_checkpoint_create(full=(kind == "full"))  # ... beat's next checkpoint (every 300 s) signs nothing

    # ... and still caught afterwards: a checkpoint must not vouch for heads its predecessor contradicts
    error = verify_audit_fails()
    assert f"chain {a[0].chain}" in error


def test_a_wiped_chain_stays_caught_after_the_owner_breaks_the_newest_checkpoints_signature(audit_key: str) -> None:
    """The owner deletes a whole chain (events and head row) and garbles the newest stored checkpoint's signature.
    verify_audit reports both. But "a new checkpoint never builds on one whose signature fails: it is a full one",
    so beat's very next checkpoint is full, names only the heads left, and is the newest: verify_audit checks
    only the newest run (``audit_stored_checkpoint_problems``), so neither the wiped chain nor the forged
    checkpoint (#1, still in the table) is ever reported again.
    """
    first, second = keys_in_distinct_chains(2)
    a = append_events(3, first)
    append_events(2, second)
    audit_checkpoint_create()
    with owner_tampering():
        AuditEvent.objects.filter(chain=a[0].chain).delete()
        AuditChainHead.objects.filter(chain=a[0].chain).delete()
        AuditCheckpoint.objects.filter(seq=1).update(signature="0" * 64)
    before = verify_audit_fails()
    assert "stored checkpoint #1: signature does not match" in before

    with pytest.raises(CheckpointRefusedError):
        audit_checkpoint_create()  # beat, five minutes later, signs nothing over a forged checkpoint

    after = verify_audit_fails()
    assert f"chain {a[0].chain}" in after or "stored checkpoint #1: signature does not match" in after


def test_a_checkpoint_file_is_never_overwritten_when_the_stored_checkpoint_it_copies_was_deleted(
    audit_key: str, settings: Any, tmp_path: Path
) -> None:
    """README: "An attacker who deletes every stored checkpoint is caught only by copies kept elsewhere
    (``AUDIT_CHECKPOINT_DIR``)". The owner cuts the last minutes of a chain and deletes the newest stored
    checkpoint (the tail of the numbering: no gap). The file copy catches it. But beat numbers its next
    checkpoint after the newest row left and writes its file with ``Path.write_text``, overwriting the copy
    that proved the truncation (toolhub/checkpoints.py ``audit_checkpoint_create``): from then on the
    directory agrees with the truncated chain and verify_audit reports it intact.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    events = append_events(2)
    audit_checkpoint_create()
    events += append_events(2, events[0].call_id)
    audit_checkpoint_create()
    original = (tmp_path / "audit-checkpoint-000000000002.json").read_text()

    cut_chain_tail(events[1], events[2], events[3])
    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=2).delete()
    assert "the tail was truncated" in verify_audit_fails()  # the file copy catches it ...

    with pytest.raises(CheckpointRefusedError):
        audit_checkpoint_create()  # ... and beat's next checkpoint signs nothing, nor writes #2 again

    assert "the tail was truncated" in verify_audit_fails()
    assert (tmp_path / "audit-checkpoint-000000000002.json").read_text() == original


@pytest.mark.parametrize(("operator", "value"), [("in", ["1001", "1002"]), ("==", "1001"), (">", 1000)])
def test_an_argument_spelled_snan_against_a_numeric_approval_rule_is_answered_not_a_server_error(
    alice: User, operator: str, value: Any
) -> None:
    """approvals/rules.py ``_normal`` turns numeric-looking text into a ``Decimal``, and ``"sNaN"`` (or ``"NaN"``
    for the ordering operators) is one; comparing it raises ``decimal.InvalidOperation``, which ``_compare``
    does not catch (only ``TypeError``). Any member (or a model, in a run) who sends ``"sNaN"`` in a string
    argument a tenant's rule reads gets a 500 with a logged traceback, not a held call or a 4xx.
    """
    ApprovalRule.objects.create(name="vip", tool_name="record_effect", argument="note", operator=operator, value=value)
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)

    response = client.post(
        "/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "sNaN"}, "tenant": "acme"}, format="json"
    )

    assert response.status_code < 500, response.status_code
