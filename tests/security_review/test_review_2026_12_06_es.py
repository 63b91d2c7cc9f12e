"""Review 2026-12-06 (es): the audit signing key rotation (reviews dz, eg), reviewed again, hostile.

Findings (fail on 98885c5-era main, pass with the fix):

1. The variable holding the retired keys could be sent to any host: ``credential_env_problem`` refused the variables
   the platform's settings name for its secrets (``AUDIT_KEY_ENV``, ``DB_APP_PASSWORD_ENV``, ``WEBHOOK_SECRET_ENV``)
   but not ``AUDIT_RETIRED_KEYS_ENV``: renamed outside ``TOOLHUB_`` (e.g. ``AUDIT_OLD_KEYS``), a model provider's or
   remote MCP server's credential could name it, and every retired key (each still signs checkpoints and exports up
   to its ``N``) went to the endpoint its configurer chose. Every setting naming a variable (``*_ENV``) is now
   refused, read from the settings themselves, so the next such setting is covered without a list to update.
2. An audit key with whitespace could not be retired (the leftover of review eg): ``TOOLHUB_AUDIT_KEY`` was used
   as set, with a trailing newline (a secret mounted from a file) or inner spaces, while ``TOOLHUB_AUDIT_RETIRED_KEYS``
   splits on whitespace; after a rotation ``N:KEY`` named another key, and every checkpoint it signed read as
   signed by an unknown key (K001) whose hint ("add the old key as N:KEY") the operator had followed. A key is now
   read without surrounding whitespace in both variables (checkpoints signed before with the whitespace still
   verify under the current key as set); a key with whitespace inside is refused with a clear error (named by its
   variable, never its text), as it could never be retired, and ``check --deploy`` warns of it (W004).
3. A key file line ``KEY valid-through-checkpoint=`` (the number missing: a line cut, a hand edit) read as a current
   key, valid for every checkpoint: a retired key's limit was dropped silently. It is now refused (exit 2).
4. The verifier's K002 message and its "signed by" note quoted the header's checkpoint number, its ``created_at``
   and ``exported_at`` unbounded: a header signed with a retired key (the holder controls them) printed thousands
   of characters per message. Each is now cut, as every other value the file supplies.

Checked and holding:
- A checkpoint signed with a retired key presented as newer than its retirement: refused whether it names the
  retired key (K002), the current key (only the current key verifies it), another id or none (only keys valid for
  its number are tried). A checkpoint with no key id numbered after ``N`` is never accepted as the old key's.
- Offline, a header naming a key id no key file holds, a non-text id, or the current key's id while signed by the
  retired one fails; ``signature.key`` is a hint outside the signed text, so forging it promotes nothing (the
  signature is checked under the key it picks). A header signed by a retired key naming checkpoint ``True``, a float
  or a string fails as naming none (UNVERIFIABLE); one naming a number past ``N`` fails (K002); a negative or zero
  number places it before the retirement, which any number up to ``N`` already does (no new power).
- Duplicated keys in a key file: two current keys are refused; a key both current and retired is taken as current
  (it is the current key); one key retired twice is taken with the validity listed first (the latest retirement as
  ``audit_public_key --all`` prints it). "Mixed keys within one file" cannot occur: a file carries one signature,
  its header's; the lines are chained, not signed.
- K001/K002 messages name ids (fingerprints) and the retirement number, hint at ``audit_public_key --all`` or the
  ``N:KEY`` entry, are bounded (the named id cut to 40, ten keys at most), and never print a key's text;
  ``audit_public_key`` (with ``--all``) prints public keys only; a malformed entry is named by its position.
- Secrets in Django's error page: the variables' names hold ``KEY``, which its filter hides.
- Not narrowed: a retired key still forges an offline export naming a checkpoint up to ``N``. The export header
  holds only the tenant's part of a checkpoint, so nothing the key file could countersign (checkpoint ``N``'s body
  digest) can be compared offline without a per-tenant proof in every export (a format change); and a date
  (``exported_at``) is the forger's own word. Left as documented.
"""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.security_review.trail_exports import acme_trail, export
from toolhub import audit_file_verify
from toolhub.audit_export_key import PublicKeyError, export_signing_key, header_signature, public_key_file_text
from toolhub.audit_keyring import load_keys
from toolhub.audit_keys import CheckpointKeyError, key_id, signing_key
from toolhub.checkpoint_checks import audit_stored_checkpoint_problems
from toolhub.checkpoints import audit_checkpoint_create

OLD = "old-audit-key-0123456789-abcdefghij"
NEW = "new-audit-key-9876543210-jihgfedcba"


def test_a_renamed_retired_keys_variable_is_refused_as_a_credential(settings: object) -> None:
    """Found: ``AUDIT_RETIRED_KEYS_ENV`` renamed (``AUDIT_OLD_KEYS``) could be named as an endpoint's credential and
    the retired keys sent to its host. Expect: refused where typed and never read, as ``AUDIT_KEY_ENV``'s."""
    from toolhub.credential_env import credential_env_problem, credential_from_env

    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "AUDIT_RETIRED_KEYS_ENV": "AUDIT_OLD_KEYS"}  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDIT_OLD_KEYS", f"1:{OLD}")
        assert credential_env_problem("AUDIT_OLD_KEYS")
        assert credential_env_problem("audit_old_keys")
        assert credential_from_env("AUDIT_OLD_KEYS") == ""
    assert credential_env_problem("ACME_LLM_KEY") is None


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", [f"{OLD}\n", f"  {OLD} "])
def test_a_key_set_with_surrounding_whitespace_can_be_retired(monkeypatch: pytest.MonkeyPatch, spelling: str) -> None:
    """Found: a key set with a trailing newline signed with it; retired as ``1:KEY`` (whitespace cannot be written
    there) it was another key, and checkpoint #1 read as signed by an unknown key (K001). Expect: the key is read
    without surrounding whitespace; after the rotation #1 verifies and #2 is signed."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", spelling)
    acme_trail(1)
    assert audit_checkpoint_create(full=True)["key"] == key_id(OLD.encode())
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", NEW)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"1:{OLD}")
    assert audit_stored_checkpoint_problems()[1] == []
    acme_trail(1)
    assert audit_checkpoint_create()["seq"] == 2
    assert audit_stored_checkpoint_problems()[1] == []


def test_a_key_with_whitespace_inside_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: a key with a space inside was used as it is, and no ``N:KEY`` entry could ever retire it. Expect:
    ``CheckpointKeyError`` naming the variable and why, never the key."""
    secret = "audit key with spaces 0123456789abcdef"
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", secret)
    with pytest.raises(CheckpointKeyError) as raised:
        signing_key()
    text = str(raised.value)
    assert "TOOLHUB_AUDIT_KEY" in text and "whitespace" in text and secret not in text and "spaces" not in text
    from toolhub.deployment_checks import check_audit_key

    warnings = check_audit_key()
    assert [warning.id for warning in warnings] == ["toolhub.W004"] and "whitespace inside" in warnings[0].msg
    assert secret not in warnings[0].msg + str(warnings[0].hint)


def _key_line(secret: str) -> str:
    return public_key_file_text(export_signing_key(secret.encode()).public_key()).rstrip().splitlines()[-1]


@pytest.mark.parametrize("suffix", [" valid-through-checkpoint=", " valid-through-checkpoint=  "])
def test_a_retired_key_with_its_number_missing_is_not_read_as_current(tmp_path: Path, suffix: str) -> None:
    """Found: ``KEY valid-through-checkpoint=`` read as a current key (valid for every checkpoint). Expect: refused,
    saying that the number is missing; the exit is 2."""
    with pytest.raises(PublicKeyError, match="checkpoint number"):
        load_keys(_key_line(OLD) + suffix, None)
    path = tmp_path / "keys.pub"
    path.write_text(f"{_key_line(NEW)}\n{_key_line(OLD)}{suffix}\n")
    with pytest.raises(PublicKeyError, match="checkpoint number"):
        load_keys(None, str(path))
    export_file = tmp_path / "export.jsonl"
    export_file.write_text("{}\n")
    with pytest.raises(SystemExit) as raised:
        audit_file_verify.main([str(export_file), "--public-key-file", str(path)])
    assert raised.value.code == 2


@pytest.mark.django_db
def test_messages_on_a_retired_key_header_are_bounded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: the K002 message quoted the header's checkpoint number whole (4,000 digits), and the "signed by" note
    its ``created_at`` and ``exported_at`` (any length). Expect: each message and note under 1,000 characters."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(2)
    audit_checkpoint_create(full=True)
    before = export(tmp_path, name="before.jsonl")
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", NEW)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"1:{OLD}")
    out = io.StringIO()
    call_command("audit_public_key", "--all", stdout=out)
    keys = tmp_path / "keys.pub"
    keys.write_text(out.getvalue())
    lines = before.read_text().splitlines()
    for seq, stamp in ((int("9" * 4000), "x"), (1, "y" * 20000)):
        header = json.loads(lines[0])
        header["checkpoint"]["seq"] = seq
        header["checkpoint"]["created_at"] = stamp
        header["exported_at"] = stamp
        header["signature"] = header_signature(OLD.encode(), header)
        forged = tmp_path / "forged.jsonl"
        forged.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
        audit_file_verify.main([str(forged), "--public-key-file", str(keys)])
        captured = capsys.readouterr()
        printed = [line for line in (captured.out + captured.err).splitlines() if line]
        assert printed and all(len(line) < 1000 for line in printed), max(map(len, printed))
        assert OLD not in captured.out + captured.err


@pytest.mark.django_db
@pytest.mark.parametrize(("signer", "holds"), [(f"{OLD}\n", True), (f"{OLD} \n", False)])
def test_a_checkpoint_signed_before_with_the_key_as_set_still_verifies(
    monkeypatch: pytest.MonkeyPatch, signer: str, holds: bool
) -> None:
    """Holding (not a finding): a checkpoint signed before keys were read trimmed, with the key's trailing newline
    (no key id), still verifies under the same key as set and the next one is signed; another spelling does not."""
    from toolhub.audit_hash import canonical_json
    from toolhub.checkpoint_signature_core import hmac_hex
    from toolhub.models import AuditChainHead, AuditCheckpoint

    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", f"{OLD}\n")
    acme_trail(1)
    heads = {str(head.chain): {"seq": head.seq, "hash": head.hash} for head in AuditChainHead.objects.all()}
    text = canonical_json({"seq": 1, "created_at": "2026-12-06T00:00:00+00:00", "heads": heads})
    AuditCheckpoint.objects.create(
        seq=1, created_at="2026-12-06T00:00:00Z", body=text, signature=hmac_hex(signer.encode(), text)
    )
    assert (audit_stored_checkpoint_problems()[1] == []) is holds
    if holds:
        acme_trail(1)
        assert audit_checkpoint_create()["seq"] == 2


@pytest.mark.django_db
@pytest.mark.parametrize("named", ["current", None, 7, "sha256:0000000000000000"])
def test_a_retired_key_header_naming_another_key_id_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, named: object
) -> None:
    """Holding (not a finding): a header signed with the retired key that names checkpoint #7 (past its N) fails
    whatever key id it names (the current key's, none, a number, an unknown one): the id is a hint outside the signed
    text, and the signature is checked under the key it picks."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", OLD)
    acme_trail(2)
    audit_checkpoint_create(full=True)
    before = export(tmp_path, name="before.jsonl")
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", NEW)
    monkeypatch.setenv("TOOLHUB_AUDIT_RETIRED_KEYS", f"1:{OLD}")
    out = io.StringIO()
    call_command("audit_public_key", "--all", stdout=out)
    keys = tmp_path / "keys.pub"
    keys.write_text(out.getvalue())
    lines = before.read_text().splitlines()
    header = json.loads(lines[0])
    header["checkpoint"]["seq"] = 7
    header["signature"] = header_signature(OLD.encode(), header)
    if named is None:
        header["signature"].pop("key")
    else:
        header["signature"]["key"] = key_id(NEW.encode()) if named == "current" else named
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert audit_file_verify.main([str(forged), "--public-key-file", str(keys)]) == 1
