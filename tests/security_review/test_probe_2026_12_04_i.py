"""Probe of 2026-12-04 (i): the refusal to sign over a contradicted trail, and surfaces no review covered yet.

Each test is a failure found on the code as probed (its docstring says how), now fixed: an acknowledged
checkpoint says so in its signed body, and numbering gaps before it no longer count; a checkpoint file is
written under a temporary name, synced and linked to its own, so a write cut short leaves no half file.
"""

from pathlib import Path
from typing import Any

import pytest

from tests.audit.conftest import acknowledge_checkpoint, append_events, cut_chain_tail, owner_tampering
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditCheckpoint

pytestmark = pytest.mark.django_db


def test_beat_signs_again_after_a_deleted_middle_checkpoint_was_acknowledged(audit_key: str) -> None:
    """A stored checkpoint in the middle of the numbering is deleted (by an attacker, or lost in a partial
    restore). Beat refuses, as it should, and a person investigates and runs ``audit_checkpoint --acknowledge``.
    That signs one full checkpoint, but ``_standing_problems`` re-reports the numbering gap on every later
    call (``_first_numbering_gap`` scans the whole table, never only what came after the acknowledgement), so
    beat's very next checkpoint is refused again, and every one after it: checkpointing stays stopped for good
    unless someone acknowledges every five minutes (toolhub/checkpoints.py ``_standing_problems``).
    """
    events = append_events(2)
    for _ in range(3):
        audit_checkpoint_create()
        events += append_events(1, events[0].call_id)
    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=2).delete()

    acknowledge_checkpoint("checkpoint #2 lost in the restore of incident 42; chains re-verified")

    audit_checkpoint_create()  # beat, five minutes later: the acknowledged gap must not refuse it again
    assert AuditCheckpoint.objects.order_by("-seq").first().seq == 5


def test_beat_signs_again_after_an_acknowledged_restore_behind_the_checkpoint_files(
    audit_key: str, settings: Any, tmp_path: Path
) -> None:
    """The database is restored from a backup older than the newest checkpoint files (the last minutes of a
    chain and the newest stored checkpoints are gone). The files catch it; a person acknowledges. The
    acknowledged checkpoint is numbered after the files ("the numbering follows the files"), which leaves
    the restored table with a gap of the lost numbers; that gap is a standing problem, so beat refuses every
    checkpoint after the acknowledged one, for good (toolhub/checkpoints.py ``audit_checkpoint_create``, the
    numbering after ``_newest_file_seq``, and ``_standing_problems``).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    events = append_events(2)
    audit_checkpoint_create()
    events += append_events(2, events[0].call_id)
    audit_checkpoint_create()
    cut_chain_tail(events[1], events[2], events[3])  # the restore lost the newest events ...
    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=2).delete()  # ... and the newest stored checkpoint

    acknowledge_checkpoint("restored from the 02:00 backup after the disk failure of incident 43")
    assert AuditCheckpoint.objects.order_by("-seq").first().seq == 3

    append_events(1)
    audit_checkpoint_create()  # beat, five minutes later
    assert AuditCheckpoint.objects.order_by("-seq").first().seq == 4


def test_a_checkpoint_file_whose_write_failed_does_not_stop_beat_for_good(
    audit_key: str, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file copy is created with ``open("x")`` and then written; when the write fails (disk full, quota,
    a crash between the two) an empty file is left under the next number, after the stored checkpoint was
    committed. Every later checkpoint reads that newest file, finds it unreadable ("cannot be read") and
    refuses as if the trail had been tampered with, until a person acknowledges a problem nobody caused
    (toolhub/checkpoints.py ``audit_checkpoint_create``: no write to a temporary name then an exclusive link).
    """
    import json as real_json
    from types import SimpleNamespace

    from toolhub import checkpoints

    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    append_events(2)
    audit_checkpoint_create()

    def disk_full(*args: Any, **kwargs: Any) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints, "json", SimpleNamespace(dumps=disk_full, loads=real_json.loads))
    append_events(1)
    with pytest.raises(OSError):
        audit_checkpoint_create()  # the disk is full for a moment: this copy is not written
    monkeypatch.setattr(checkpoints, "json", real_json)

    append_events(1)
    audit_checkpoint_create()  # space again, five minutes later: beat signs, with nothing tampered with
    assert AuditCheckpoint.objects.order_by("-seq").first().seq == 3
