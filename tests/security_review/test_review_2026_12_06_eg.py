"""Review 2026-12-06 (eg): the audit signing key rotation of review dz, reviewed.

Findings (fail on 0fe5faa-era main, pass with the fix):

1. ``TOOLHUB_AUDIT_RETIRED_KEYS`` read ``N`` with ``str.isdigit`` and ``int``: a digit ``int`` does not read (``²``)
   or more digits than it converts (5,000) raised a bare ``ValueError``, not ``CheckpointKeyError``; every page of
   the admin showing the trail's status answered 500, and beat, ``verify_audit`` and ``audit_public_key`` stopped
   with a traceback instead of naming the entry. A non-ASCII digit (``٣``) was read as 3. ``N`` is now ASCII digits,
   at most 18 (a checkpoint number fits a bigint), read by one parser with the key file's ``valid-through``.
2. The offline verifier read a key file's ``valid-through-checkpoint=N`` the same way: a hostile key file made it
   exit with a traceback instead of exit 2 naming what is wrong.
3. A stored checkpoint (or a checkpoint file) nested thousands deep, as whoever may write the database or the
   checkpoint directory can plant, ended ``verify_audit``, beat's checkpoint and the console's status in
   ``RecursionError`` instead of naming it as not signed: a checkpoint's text is decoded with its nesting measured
   first (``toolhub.json_intake``), as every JSON from outside is.
4. A retired key's ``N`` set past the newest checkpoint (a typo: ``1000:KEY`` for ``10:KEY``) was taken at its word:
   the current key signed checkpoints the retired key stayed valid for, so whoever held it could sign more that
   verified, silently. Signing a checkpoint a retired key is configured valid for is now refused, naming that key
   by id (K002) and the highest ``N`` that fits.
5. A key file longer than the 64 KiB the verifier reads was cut there silently: the keys after the cut were
   dropped (a header naming one read as "none of the keys given") or the cut line read as a malformed key. It is
   now refused, saying it is larger than a key file can be.

Checked and holding:
- No message names a retired key's text: a malformed entry is named by its position only, a key by its id.
- Entries separated by any whitespace, several spaces or newlines; an empty variable is no retired key; a key
  containing ``:`` keeps it (only the first ``:`` separates ``N``); ``-1:KEY``, ``:KEY``, ``5:`` are refused.
- A retired key equal to the current key, or one key retired twice, weakens nothing: the current key verifies any
  checkpoint anyway, and the verifier picks the current key (listed first) or the later retirement, as the
  stored-checkpoint check accepts the key for any entry valid for it.
- A checkpoint naming the current key's id numbered in a retired key's range verifies: only the current key's
  holder can sign it, and stored checkpoints are numbered after the newest (a trigger), so no one can insert one.
- A checkpoint whose ``key`` is a list, a dict or a number reads as forged, with the value bounded in the message.
- Timing: a key's id costs ~90 µs (HKDF and Ed25519), an HMAC ~10 µs; a verification reads at most one run
  (``DELTAS_PER_FULL`` + 1 checkpoints) and ten acknowledged ones, so five keys add ~0.15 s at worst.
- The console lists retired public keys only to those who may export (as the current one); they are public.
- An export header signed with a retired key naming a checkpoint after its retirement, or none, fails (dz); an
  export made after the rotation is signed with the current key, since only the current key signs.
"""

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from tests.security_review.trail_exports import acme_trail
from toolhub import audit_file_verify
from toolhub.audit_export_key import PublicKeyError, export_signing_key, public_key_file_text
from toolhub.audit_keyring import ExportKey, keyring_file_text, load_keys
from toolhub.audit_keys import CheckpointKeyError, retired_keys
from toolhub.checkpoint_checks import audit_stored_checkpoint_problems, audit_stored_file_problems
from toolhub.checkpoints import audit_checkpoint_create, checkpoint_base
from toolhub.models import AuditCheckpoint

CURRENT = "current-audit-key-0123456789-abcdef"
SECRET = "retired-secret-key-do-not-show-9876"


@pytest.mark.django_db  # an operator command lifts the statement bound on PostgreSQL (a SET on the connection)
@pytest.mark.parametrize("through", ["²", "9" * 5000, "٣"])
def test_a_malformed_retired_key_number_is_named_not_crashed_on(monkeypatch: pytest.MonkeyPatch, through: str) -> None:
    """Found: ``N`` read with isdigit and int: ``²`` or 5,000 digits raised ValueError, ``٣`` read as 3. Expect:
    ``CheckpointKeyError`` naming the entry by position, never the key."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", CURRENT)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"1:other-retired-key-0123456789 {through}:{SECRET}")
    with pytest.raises(CheckpointKeyError) as raised:
        retired_keys()
    assert "entry 2" in str(raised.value) and SECRET not in str(raised.value)
    with pytest.raises(CommandError) as command:
        call_command("audit_public_key", "--all", stdout=io.StringIO())
    assert "entry 2" in str(command.value) and SECRET not in str(command.value)


@pytest.mark.django_db
def test_the_admin_still_answers_with_a_malformed_retired_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the admin index (the trail's status, the export keys) answered 500 for ``²:KEY``. Expect: the page
    renders, without the retired key's text."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", CURRENT)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"²:{SECRET}")
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    response = client.get("/admin/")
    assert response.status_code == 200 and SECRET not in response.content.decode()


def _key_line(secret: bytes) -> str:
    return public_key_file_text(export_signing_key(secret).public_key()).rstrip().splitlines()[-1]


@pytest.mark.parametrize("through", ["²", "9" * 5000])
def test_a_hostile_validity_in_a_key_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], through: str
) -> None:
    """Found: ``valid-through-checkpoint=²`` (or 5,000 digits) made the offline verifier crash with a traceback.
    Expect: exit 2 naming the value (bounded) as no checkpoint number."""
    keys = tmp_path / "keys.pub"
    keys.write_text(f"{_key_line(b'a')}\n{_key_line(b'b')} valid-through-checkpoint={through}\n")
    export = tmp_path / "export.jsonl"
    export.write_text("{}\n")
    with pytest.raises(SystemExit) as raised:
        audit_file_verify.main([str(export), "--public-key-file", str(keys)])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "is not a checkpoint number" in err and len(err) < 1000


def test_a_key_file_too_large_is_refused_not_cut(tmp_path: Path) -> None:
    """Found: a key file past 64 KiB was read up to there: the keys after were dropped silently, or the cut line
    read as a malformed key. Expect: refused, saying it is larger than a key file can be."""
    keys = [ExportKey(export_signing_key(b"current").public_key())]
    keys += [ExportKey(export_signing_key(str(n).encode()).public_key(), n) for n in range(600, 0, -1)]
    path = tmp_path / "keys.pub"
    path.write_text(keyring_file_text(keys))
    assert path.stat().st_size > 64 * 1024
    with pytest.raises(PublicKeyError, match="larger than") as raised:
        load_keys(None, str(path))
    assert str(path) in str(raised.value)


@pytest.mark.django_db
def test_a_checkpoint_nested_thousands_deep_reads_as_forged_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, settings: object, tmp_path: Path
) -> None:
    """Found: a stored checkpoint (or file) whose ``key`` nests 5,000 lists deep raised ``RecursionError`` in
    every check of the checkpoints. Expect: it is named as not signed, and ``checkpoint_base`` reads no base."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", CURRENT)
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}  # type: ignore[attr-defined]
    acme_trail(1)
    audit_checkpoint_create(full=True)
    deep = "[" * 5000 + "]" * 5000
    text = f'{{"base":1,"created_at":"x","heads":{{}},"key":{deep},"seq":2}}'
    row = AuditCheckpoint.objects.create(seq=2, created_at="2026-12-06T00:00:00Z", body=text, signature="0" * 64)
    _, problems = audit_stored_checkpoint_problems()
    assert any("stored checkpoint #2: signature does not match" in str(problem) for problem in problems)
    assert all(len(str(problem)) < 800 for problem in problems)
    assert checkpoint_base(row) is None
    (tmp_path / "audit-checkpoint-000000000002.json").write_text(text)
    newest, problems = audit_stored_file_problems()
    assert newest is not None and newest.name == "audit-checkpoint-000000000002.json" and problems


OLD = "old-audit-key-0123456789-abcdefghij"


@pytest.mark.django_db
def test_a_retirement_past_the_newest_checkpoint_is_refused_at_signing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: ``1000:OLD`` with the newest checkpoint #1 was accepted: the new key signed #2 while the old one
    stayed valid for it. Expect: signing #2 is refused, naming the old key's id (not its text), K002; ``1:OLD``
    signs."""
    from toolhub.audit_keys import key_id

    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(1)
    audit_checkpoint_create(full=True)
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", CURRENT)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"1000:{OLD}")
    acme_trail(1)
    with pytest.raises(CheckpointKeyError) as raised:
        audit_checkpoint_create()
    text = str(raised.value)
    assert key_id(OLD.encode()) in text and "#1000" in text and "toolhub.audit.K002" in text and OLD not in text
    assert not AuditCheckpoint.objects.filter(seq=2).exists()
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"1:{OLD}")
    assert audit_checkpoint_create()["seq"] == 2
