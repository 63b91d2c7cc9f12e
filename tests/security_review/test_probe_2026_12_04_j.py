"""Probe of 2026-12-04 (j): the refusal to sign over a contradicted trail, after the acknowledgement review.

Each test failed on the code as probed (its docstring says how) and passes now: the heads signed are read
before the check (a chain cut after the check is not in them); a copy is written exclusively where the file
system has no hard links; the numbering always follows the newest copy; the newest copy is the highest
well-formed number (an export kept beside the copies is not one).
"""

import errno
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.audit.conftest import (
    acknowledge_checkpoint,
    append_events,
    cut_chain_tail,
    keys_in_distinct_chains,
    verify_audit_fails,
)
from toolhub import checkpoints, new_files
from toolhub.checkpoints import CheckpointRefusedError, audit_checkpoint_create
from toolhub.models import AuditCheckpoint

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", ["delta", "full"])
def test_a_chain_cut_between_the_check_and_the_signing_is_not_signed_away(
    audit_key: str, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """``audit_checkpoint_create`` checks the trail (``_standing_problems``) and then, in later statements of
    the same READ COMMITTED transaction, reads the chain heads it signs. Nothing ties the two: an owner who
    watches for beat's advisory lock (pg_locks, every 300 s) and cuts a chain's tail right after the check
    gets the rewound head signed as the newest checkpoint, and verify_audit reports the trail intact from
    then on: exactly what the refusal of the previous commit exists to prevent
    (toolhub/checkpoints.py ``audit_checkpoint_create``: heads read after, and apart from, the check).
    The attacker's statements are run here at that moment, on the test's connection.
    """
    first, second = keys_in_distinct_chains(2)
    a = append_events(4, first)
    append_events(2, second)
    audit_checkpoint_create()

    checked = checkpoints._standing_problems

    def check_then_attacker_cuts(*heads: Any) -> list[Any]:
        problems = checked(*heads)
        cut_chain_tail(a[1], a[2], a[3])  # committed by another connection between the check and the signing
        return problems

    monkeypatch.setattr(checkpoints, "_standing_problems", check_then_attacker_cuts)
    try:
        audit_checkpoint_create(full=(kind == "full"))  # beat
    except CheckpointRefusedError:
        pass  # refusing is a fix too
    monkeypatch.setattr(checkpoints, "_standing_problems", checked)

    assert f"chain {a[0].chain}" in verify_audit_fails()


def test_checkpoint_files_are_still_written_where_hard_links_are_not_supported(
    audit_key: str, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_write_copy`` now publishes a file only with ``os.link``. The copies are meant to be kept elsewhere
    (README: the only thing that catches deleted stored checkpoints), typically on a network share, and
    several (SMB/Azure Files, s3fs/gcsfuse and other FUSE mounts) refuse hard links (EPERM/ENOTSUP). There
    every checkpoint row is committed and then the task raises OSError: no file is ever written again, the
    newest file stays the last one written before the upgrade, and deleting the newest stored checkpoints
    with a chain's tail goes unseen (toolhub/checkpoints.py ``_write_copy``: no fallback to an exclusive create).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}

    def no_hard_links(source: Any, target: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted", str(target))

    monkeypatch.setattr(new_files.os, "link", no_hard_links)
    append_events(2)
    try:
        audit_checkpoint_create()
    except OSError:
        pass

    assert (tmp_path / "audit-checkpoint-000000000001.json").is_file()


def test_an_acknowledged_restore_behind_a_hole_in_the_files_lets_beat_sign_again(
    audit_key: str, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two benign events the last commit says it copes with, together. The copy of checkpoint #2 was never
    written (disk full for a moment: tolerated, test_probe_2026_12_04_i), #3's was. Later the database is
    restored from a backup taken after #1 (the newest events and stored checkpoints #2, #3 are gone). File #3
    catches it; a person acknowledges. "The numbering follows the files" only when the *next* number's file
    exists (``_file_name(last + 1)``): #2's does not, so the acknowledged checkpoint is #2, below the newest
    file #3, which still contradicts the restored chain. Beat refuses again at once, and verify_audit keeps
    failing after the acknowledgement (toolhub/checkpoints.py ``audit_checkpoint_create``: ``last`` is raised to
    ``_newest_file_seq`` only when file ``last + 1`` exists).
    """
    import json as real_json
    from types import SimpleNamespace

    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    events = append_events(2)
    audit_checkpoint_create()  # #1, with its file

    def disk_full(*args: Any, **kwargs: Any) -> str:
        raise OSError(28, "No space left on device")

    events += append_events(1, events[0].call_id)
    monkeypatch.setattr(checkpoints, "json", SimpleNamespace(dumps=disk_full, loads=real_json.loads))
    with pytest.raises(OSError):
        audit_checkpoint_create()  # #2 stored, its file not written
    monkeypatch.setattr(checkpoints, "json", real_json)
    events += append_events(1, events[0].call_id)
    audit_checkpoint_create()  # #3, with its file
    assert sorted(path.name for path in tmp_path.glob("audit-checkpoint-*.json")) == [
        "audit-checkpoint-000000000001.json",
        "audit-checkpoint-000000000003.json",
    ]

    # the restore: back to just after #1
    cut_chain_tail(events[1], events[2], events[3])
    from tests.audit.conftest import owner_tampering

    with owner_tampering():
        AuditCheckpoint.objects.filter(seq__gt=1).delete()

    _acknowledged = "restored from the backup taken after checkpoint #1 (incident 44)"
    acknowledge_checkpoint(_acknowledged)

    append_events(1)
    audit_checkpoint_create()  # beat, five minutes later: must sign, the restore was acknowledged
    newest = json.loads(AuditCheckpoint.objects.order_by("-seq").first().body)
    assert "acknowledged" not in newest


def test_a_foreign_file_in_the_checkpoint_directory_does_not_stop_beat_for_good(
    audit_key: str, settings: Any, tmp_path: Path
) -> None:
    """``audit_stored_file_problems`` takes the *lexically* last ``audit-checkpoint-*.json`` as the newest file,
    while the writer numbers files by ``_newest_file_seq`` (numeric, digits only). An export kept beside the
    copies (README suggests ``audit_checkpoint --output`` as a copy kept elsewhere), say
    ``audit-checkpoint-before-upgrade.json``, sorts after every numbered file: it is "renamed" (its seq is not
    its name), so beat refuses, and it stays the "newest" file after an acknowledgement, so beat refuses again
    every interval, for good; the real newest copy is never checked (toolhub/checkpoints.py
    ``audit_stored_file_problems``: ``sorted(glob(...))[-1]`` instead of the highest well-formed number).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    append_events(2)
    audit_checkpoint_create()
    export = tmp_path / "audit-checkpoint-before-upgrade.json"
    call_command("audit_checkpoint", "--output", str(export), stdout=StringIO(), stderr=StringIO())

    append_events(1)
    try:
        audit_checkpoint_create()  # beat
    except CheckpointRefusedError:
        acknowledge_checkpoint("the export before the upgrade is ours")
    append_events(1)
    audit_checkpoint_create()  # beat, five minutes later
