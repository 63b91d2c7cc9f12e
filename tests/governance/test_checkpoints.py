"""Signed audit checkpoints detect a truncated tail that the chains alone cannot."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from toolhub.models import AuditChainHead, AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def audit_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "checkpoint-key")


@pytest.fixture
def trigger_off() -> Iterator[None]:
    """Tampering needs the database's append-only triggers out of the way, as an attacker with DDL would."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE toolhub_auditevent DISABLE TRIGGER toolhub_audit_append_only")
            cursor.execute("ALTER TABLE toolhub_auditchainhead DISABLE TRIGGER toolhub_audit_head_forward")
    yield
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE toolhub_auditevent ENABLE TRIGGER toolhub_audit_append_only")
            cursor.execute("ALTER TABLE toolhub_auditchainhead ENABLE TRIGGER toolhub_audit_head_forward")


def _calls(request_call, count: int) -> None:
    for index in range(count):
        request_call("record_effect", {"note": f"n{index}"})


def test_truncating_the_tail_and_rewriting_the_head_is_detected_by_the_checkpoint(
    request_call, audit_key, trigger_off, tmp_path: Path
) -> None:
    # given a trail and a checkpoint taken now (stored, and exported to a file)
    _calls(request_call, 3)
    checkpoint = tmp_path / "checkpoint.json"
    call_command("audit_checkpoint", "--output", str(checkpoint))
    call_command("verify_audit", "--no-progress", "--checkpoint", str(checkpoint))

    # when an attacker deletes the newest events of a chain and rewinds its head to match
    victim = AuditEvent.objects.order_by("-id").first()
    chain = victim.chain
    newest = list(AuditEvent.objects.filter(chain=chain).order_by("-seq")[:2])
    AuditEvent.objects.filter(pk__in=[event.pk for event in newest]).delete()
    survivor = AuditEvent.objects.filter(chain=chain).order_by("-seq").first()
    AuditChainHead.objects.filter(chain=chain).update(
        seq=survivor.seq if survivor else 0, hash=survivor.hash if survivor else ""
    )

    # then the chains alone would still verify, but the stored checkpoint and the file both name the truncation
    from toolhub.audit_verify import verify_audit_chains

    assert verify_audit_chains()[1] == []
    with pytest.raises(CommandError, match=rf"chain {chain}: the checkpoint's head .* truncated"):
        call_command("verify_audit", "--no-progress")
    with pytest.raises(CommandError, match=rf"chain {chain}: the checkpoint's head .* truncated"):
        call_command("verify_audit", "--no-progress", "--checkpoint", str(checkpoint))


def test_a_forged_checkpoint_is_refused(request_call, audit_key, tmp_path: Path) -> None:
    _calls(request_call, 1)
    path = tmp_path / "checkpoint.json"
    call_command("audit_checkpoint", "--output", str(path))
    forged = json.loads(path.read_text())
    first = next(iter(forged["heads"]))
    forged["heads"][first]["seq"] += 5
    path.write_text(json.dumps(forged))
    with pytest.raises(CommandError, match="signature does not match"):
        call_command("verify_audit", "--no-progress", "--checkpoint", str(path))


def test_without_the_key_no_checkpoint_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY", raising=False)
    with pytest.raises(CommandError, match="TOOLHUB_AUDIT_KEY"):
        call_command("audit_checkpoint")
