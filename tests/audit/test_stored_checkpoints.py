"""Beat stores signed checkpoints; verify_audit never calls a chain intact that shrank or vanished since then."""

import json
import logging
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from tests.audit.conftest import (
    append_events,
    cut_chain_tail,
    forge_stored_checkpoint,
    keys_in_distinct_chains,
    owner_tampering,
)
from toolhub.celery import app as celery_app
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.conf import DEFAULTS
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent
from toolhub.tasks import audit_checkpoint_task

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _verify() -> str:
    out = StringIO()
    call_command("verify_audit", "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def _verify_fails() -> tuple[str, str]:
    err = StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("verify_audit", "--no-progress", stdout=StringIO(), stderr=err)
    return str(excinfo.value), err.getvalue()


def _two_chains() -> tuple[list[AuditEvent], list[AuditEvent]]:
    first, second = keys_in_distinct_chains(2)
    return append_events(4, first), append_events(3, second)


def test_beat_runs_the_checkpoint_task_at_the_configured_interval() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["toolhub-audit-checkpoint"]

    assert entry["task"] == "toolhub.tasks.audit_checkpoint_task"
    assert entry["task"] in celery_app.tasks
    assert entry["schedule"] == float(DEFAULTS["AUDIT_CHECKPOINT_SECONDS"]) == 300.0


def test_the_checkpoint_interval_comes_from_the_environment() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "toolhub.settings", "TOOLHUB_AUDIT_CHECKPOINT_SECONDS": "45"}
    code = "from toolhub import settings; print(settings.CELERY_BEAT_SCHEDULE['toolhub-audit-checkpoint']['schedule'])"

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)

    assert done.stdout.strip() == "45.0", done.stderr


def test_the_task_stores_numbered_signed_checkpoints_that_verify_audit_finds(audit_key: str) -> None:
    a, b = _two_chains()

    audit_checkpoint_task.delay()
    append_events(1, a[0].call_id)
    audit_checkpoint_task.delay()

    stored = list(AuditCheckpoint.objects.order_by("seq"))
    assert [checkpoint.seq for checkpoint in stored] == [1, 2]
    first, newest = json.loads(stored[0].body), json.loads(stored[1].body)
    assert "base" not in first and first["heads"][str(b[0].chain)] == {"seq": 3, "hash": b[-1].hash}
    # the second names only the head that moved, on the full first one
    assert newest["base"] == 1 and list(newest["heads"]) == [str(a[0].chain)]
    assert newest["heads"][str(a[0].chain)]["seq"] == 5
    assert audit_key not in stored[1].body and len(stored[1].signature) == 64
    assert "Audit trail verified: 8 events, every chain intact and matches stored checkpoint #2" in _verify()


def test_without_the_key_the_task_warns_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY", raising=False)
    append_events(2)

    with caplog.at_level(logging.WARNING, logger="toolhub.tasks"):
        audit_checkpoint_task.delay()

    assert "Audit checkpoint not written: Set the environment variable TOOLHUB_AUDIT_KEY" in caplog.text
    assert AuditCheckpoint.objects.count() == 0


def test_an_intact_trail_verifies_against_the_stored_checkpoint(audit_key: str) -> None:
    _two_chains()
    audit_checkpoint_create()
    append_events(2)  # events after the checkpoint are fine

    assert "every chain intact and matches stored checkpoint #1" in _verify()


def test_without_any_checkpoint_verify_says_a_truncation_would_go_unseen() -> None:
    append_events(2)

    output = _verify()

    assert "Audit trail verified: 2 events, every chain intact." in output
    assert "No stored checkpoint yet" in output


def test_deleting_the_newest_events_of_a_chain_fails_naming_the_chain(audit_key: str) -> None:
    # given two chains and a stored checkpoint
    a, b = _two_chains()
    audit_checkpoint_create()

    # when an attacker with the owner's rights deletes b's newest events and rewinds its head to match
    cut_chain_tail(b[0], b[1], b[2])

    # then verify_audit fails and names that chain only
    error, err = _verify_fails()
    chain = b[0].chain
    assert f"chain {chain}: the checkpoint's head (seq 3) is missing: the tail was truncated" in error
    assert f"the newest left is event #{b[0].pk} (seq 1)" in error
    assert "its chain head went back to seq 1 (per stored checkpoint #1)" in error
    assert "1 problem(s)" in error
    assert f"chain {a[0].chain}" not in err


def test_deleting_the_newest_events_without_touching_the_head_fails_too(audit_key: str) -> None:
    a, b = _two_chains()
    audit_checkpoint_create()

    with owner_tampering():
        AuditEvent.objects.filter(pk=a[-1].pk).delete()

    error, err = _verify_fails()
    assert f"TAMPERED chain {a[0].chain}: the checkpoint's head (seq 4) is missing" in err
    assert f"chain {a[0].chain}: after seq 3 (seq 3): chain head says seq 4" in err


def test_wiping_a_whole_chain_and_its_head_fails_naming_the_chain(audit_key: str) -> None:
    a, b = _two_chains()
    audit_checkpoint_create()

    with owner_tampering():
        AuditEvent.objects.filter(chain=a[0].chain).delete()
        AuditChainHead.objects.filter(chain=a[0].chain).delete()

    error, err = _verify_fails()
    assert f"chain {a[0].chain}: the checkpoint's head (seq 4) is missing: the tail was truncated; " in error
    assert "no event of it is left; its chain head is missing: the chain was wiped" in error
    assert f"chain {b[0].chain}" not in err


def test_a_chain_whose_head_alone_was_removed_fails_naming_the_chain(audit_key: str) -> None:
    # given a chain that no checkpoint names yet (its first event came after the newest checkpoint)
    earlier, later = keys_in_distinct_chains(2)
    append_events(2, earlier)
    audit_checkpoint_create()
    events = append_events(3, later)

    # when its head row is removed, its events left
    with owner_tampering():
        AuditChainHead.objects.filter(chain=events[0].chain).delete()

    # then verification names the chain, though no checkpoint does
    error, err = _verify_fails()
    assert f"chain {events[0].chain}: after seq 3 (seq 3): the chain has events but no chain head" in err
    assert f"1 problem(s), first: chain {events[0].chain}" in error


def test_a_deleted_stored_checkpoint_leaves_a_gap_that_fails(audit_key: str) -> None:
    append_events(2)
    for _ in range(3):
        audit_checkpoint_create()

    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=2).delete()

    error, _ = _verify_fails()
    assert "stored checkpoint #2 is missing (the next left is #3): checkpoints were deleted" in error


def test_a_stored_checkpoint_whose_signature_fails_is_reported(audit_key: str) -> None:
    events = append_events(3)
    audit_checkpoint_create()

    forge_stored_checkpoint(events[0].chain, 1)

    error, _ = _verify_fails()
    assert "stored checkpoint #1: signature does not match: it was altered or signed with another key" in error


def test_stored_checkpoints_without_the_key_are_not_called_intact(
    audit_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    append_events(2)
    audit_checkpoint_create()
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")

    error, _ = _verify_fails()
    assert "the stored checkpoints cannot be checked" in error
    assert "Set the environment variable TOOLHUB_AUDIT_KEY" in error


def test_the_checkpoint_directory_catches_a_truncation_even_when_the_stored_checkpoints_are_gone(
    audit_key: str, settings: object, tmp_path: Path
) -> None:
    # given checkpoints also written to a directory the database's owner cannot reach
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    a, b = _two_chains()
    audit_checkpoint_create()
    audit_checkpoint_create()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "audit-checkpoint-000000000001.json",
        "audit-checkpoint-000000000002.json",
    ]
    output = _verify()
    assert "matches stored checkpoint #2 of" in output
    assert "and checkpoint file audit-checkpoint-000000000002.json." in output

    # when an attacker truncates a chain and removes every stored checkpoint
    cut_chain_tail(a[2], a[3])
    with owner_tampering():
        AuditCheckpoint.objects.all().delete()

    # then the newest file, with the full one it builds on (no head moved since: #2 names none), names the chain
    # (and the record of the verification above, that #2 is gone)
    _, reported = _verify_fails()
    assert f"chain {a[0].chain}: the checkpoint's head (seq 4) is missing" in reported
    assert "(per checkpoint file audit-checkpoint-000000000001.json)" in reported
    assert "stored checkpoint #2 is missing (verify_audit compared the trail with it on" in reported
