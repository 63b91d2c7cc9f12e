"""Review 2026-12-06 (dz): rotating the audit signing key; old checkpoints and exports stay verifiable.

Findings (fail on c47168e-era main, pass with the fix):

1. Rotating ``TOOLHUB_AUDIT_KEY`` turned every checkpoint signed before into "signature does not match: it was
   altered" (``TAMPERED`` in ``verify_audit``, the console, the admin's verify page), and beat refused to sign any
   checkpoint again (the newest stored one no longer verified) until an operator acknowledged forged checkpoints
   that were not forged. Retired keys are now configured (``TOOLHUB_AUDIT_RETIRED_KEYS``: ``N:KEY``, valid for the
   checkpoints up to #N it signed), and a checkpoint verifies under the current key or a retired one valid for it.
2. A checkpoint named no key: a failed signature could not tell "signed with a key toolhub was not given" from
   "altered". New checkpoints carry their key's id (the fingerprint of the export public key derived from it),
   inside the signed body.
3. A retired key is accepted only for checkpoints numbered up to its retirement: a checkpoint signed with it after
   is refused, saying so (id ``toolhub.audit.K002``); a key no configuration knows is named with the current one and
   a hint on how to configure a rotated key (``toolhub.audit.K001``), bounded.
4. After a rotation an auditor could verify an export made before it only by swapping key files by hand, and one
   file could not hold the keys with their validity. ``audit_public_key --all`` prints the current and retired
   public keys with the checkpoint each is valid through; the verifier reads that file, picks the key the header
   names, and refuses a header signed with a retired key that claims a checkpoint after that key's retirement.

Checked and holding:
- The export header already named its signing key's fingerprint; a header checked against a single other key is
  ``UNVERIFIABLE`` ("not the public key given"), not ``TAMPERED``.
- Nothing is re-signed: checkpoints stored before (without a key id) verify as they are, under the key that signed
  them; an export signed before verifies with the retired public key as printed after the rotation.
- An export's signature can never pass for a checkpoint's (its text starts with a purpose string).
"""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.security_review.trail_exports import acme_trail, export
from toolhub import audit_file_verify
from toolhub.audit_export_key import export_signing_key, header_signature, public_key_text
from toolhub.audit_hash import canonical_json
from toolhub.checkpoint_checks import audit_stored_checkpoint_problems
from toolhub.checkpoint_signature_core import hmac_hex
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditCheckpoint

pytestmark = pytest.mark.django_db

OLD = "old-audit-key-0123456789-abcdefghij"
NEW = "new-audit-key-9876543210-jihgfedcba"


def _fingerprint(key: str) -> str:
    return public_key_text(export_signing_key(key.encode()).public_key()).fingerprint


def _rotate(monkeypatch: pytest.MonkeyPatch, through: int) -> None:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", NEW)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"{through}:{OLD}")


def _forge(key: str, seq: int, *, named: str | None) -> None:
    """A checkpoint numbered ``seq`` signed with ``key`` (as whoever holds it and may insert rows would)."""
    heads = json.loads(AuditCheckpoint.objects.order_by("-seq").first().body)["heads"]  # type: ignore[union-attr]
    body = {"seq": seq, "created_at": "2026-12-06T00:00:00+00:00", "heads": heads}
    if named is not None:
        body["key"] = named
    text = canonical_json(body)
    AuditCheckpoint.objects.create(
        seq=seq, created_at="2026-12-06T00:00:00Z", body=text, signature=hmac_hex(key.encode(), text)
    )


def test_checkpoints_signed_before_a_rotation_still_verify_and_new_ones_build_on_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: after a rotation every earlier checkpoint read as altered and beat refused to sign. Expect: with the
    old key retired through #1, #1 verifies, the next checkpoint is signed and verified."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(2)
    audit_checkpoint_create(full=True)
    _rotate(monkeypatch, through=1)
    newest, problems = audit_stored_checkpoint_problems()
    assert newest is not None and newest.seq == 1 and problems == []
    acme_trail(1)
    document = audit_checkpoint_create()
    assert document["seq"] == 2
    assert audit_stored_checkpoint_problems()[1] == []


def test_a_checkpoint_names_the_key_it_was_signed_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: a checkpoint named no key. Expect: its signed body names the key's id (the export key fingerprint)."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(1)
    document = audit_checkpoint_create(full=True)
    assert document["key"] == _fingerprint(OLD)
    assert json.loads(AuditCheckpoint.objects.get(seq=1).body)["key"] == _fingerprint(OLD)


def test_a_retired_key_cannot_sign_a_checkpoint_after_its_retirement(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: no notion of a retired key. Expect: a checkpoint numbered after the old key's retirement and signed
    with it is refused, named as such (K002), and the next checkpoint is not signed over it."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(1)
    audit_checkpoint_create(full=True)
    _rotate(monkeypatch, through=1)
    _forge(OLD, 2, named=_fingerprint(OLD))
    _, problems = audit_stored_checkpoint_problems()
    text = " ".join(map(str, problems))
    assert "stored checkpoint #2" in text and "retired after checkpoint #1" in text and "toolhub.audit.K002" in text
    _forge(OLD, 3, named=None)  # naming no key does not help
    _, problems = audit_stored_checkpoint_problems()
    assert any("stored checkpoint #3: signature does not match" in str(problem) for problem in problems)


def test_a_checkpoint_signed_with_an_unknown_key_says_which_and_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: "signature does not match: it was altered or signed with another key", with no key named and no hint.
    Expect: the unknown key's id, the current key's, an id (K001) and how to configure a rotated key; bounded."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(1)
    audit_checkpoint_create(full=True)
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", NEW)  # rotated, the old key not configured
    _, problems = audit_stored_checkpoint_problems()
    text = " ".join(map(str, problems))
    assert _fingerprint(OLD) in text and _fingerprint(NEW) in text
    assert "toolhub.audit.K001" in text and "TOOLHUB_AUDIT_RETIRED_KEYS" in text
    _forge(NEW, 2, named="x" * 5000)
    _, problems = audit_stored_checkpoint_problems()
    assert all(len(str(problem)) < 800 for problem in problems)


def _key_file(tmp_path: Path) -> Path:
    out = io.StringIO()
    call_command("audit_public_key", "--all", stdout=out)
    path = tmp_path / "toolhub-audit.pub"
    path.write_text(out.getvalue())
    return path


def test_an_export_made_before_a_rotation_verifies_offline_with_the_published_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: one key per file, no list of the keys with their validity. Expect: ``audit_public_key --all`` lists
    the current and retired keys; with that file an export from before and one from after the rotation verify."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(2)
    audit_checkpoint_create(full=True)
    before = export(tmp_path, name="before.jsonl")
    _rotate(monkeypatch, through=1)
    acme_trail(1)
    audit_checkpoint_create()
    after = export(tmp_path, name="after.jsonl")
    keys = _key_file(tmp_path)
    text = keys.read_text()
    assert _fingerprint(OLD) in text and _fingerprint(NEW) in text and "valid-through-checkpoint=1" in text
    assert audit_file_verify.main([str(before), "--public-key-file", str(keys)]) == 0
    assert "retired" in capsys.readouterr().out
    assert audit_file_verify.main([str(after), "--public-key-file", str(keys)]) == 0


def test_an_export_forged_with_a_retired_key_does_not_verify_as_current(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: nothing bounded what a retired key vouches for. Expect: a header signed with the retired key that
    claims a checkpoint after its retirement fails (K002)."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(2)
    audit_checkpoint_create(full=True)
    before = export(tmp_path, name="before.jsonl")
    _rotate(monkeypatch, through=1)
    keys = _key_file(tmp_path)
    lines = before.read_text().splitlines()
    header = json.loads(lines[0])
    header["checkpoint"]["seq"] = 7
    header["exported_at"] = "2027-01-01T00:00:00+00:00"
    header["signature"] = header_signature(OLD.encode(), header)
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert audit_file_verify.main([str(forged), "--public-key-file", str(keys)]) == 1
    err = capsys.readouterr().err
    assert "retired" in err and "toolhub.audit.K002" in err


def test_the_console_lists_the_retired_public_keys_with_their_validity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the console showed the current public key only. Expect: with a retired key, the audit page lists its
    public key's fingerprint with the last checkpoint it is valid for, beside the current key."""
    from django.contrib.auth.models import User
    from django.test import Client

    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(1)
    audit_checkpoint_create(full=True)
    _rotate(monkeypatch, through=1)
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get("/admin/").content.decode()
    assert _fingerprint(NEW) in page and _fingerprint(OLD) in page and "up to #1" in page
