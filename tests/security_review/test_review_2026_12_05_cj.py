"""Review of 2026-12-05 (cj): who can check an exported audit trail's signature, and what they must hold to do it.

Each test failed on the reviewed code (main at b0c20f9) and passes now.

Findings:

1. An export's header was signed with the audit checkpoint key, an HMAC key, and ``audit_file_verify --key-env``
   checked it with that same key: an auditor had to hold the platform's secret, which also signs checkpoints and
   export headers (a verifier who can forge is no independent check), and the key had to leave the platform. The
   header is now signed with an Ed25519 key derived from the checkpoint key (HKDF-SHA256, info
   ``toolhub-audit-export-ed25519/1``: no new secret, unrelated to the HMAC's uses; ``toolhub.audit_export_key``,
   Django-free). ``manage.py audit_public_key`` and the console's audit page show its public key (base64, hex,
   fingerprint); the verifier checks with ``--public-key KEY`` or ``--public-key-file FILE`` and needs no secret.
   ``--key-env`` is replaced (a usage error pointing to ``--public-key``): a second way that needs the secret is
   the gap itself.
2. Bad input to the new path is answered in words, never a traceback: a wrong public key (the header names another
   key), a malformed key or key file (usage error, exit 2), an older file signed with the HMAC only, a missing or
   malformed signature, a header modified after signing (exit 1).

Checked and holding (no test here): the signed text is ``export_header_text`` (purpose-prefixed, never a
checkpoint body); the signature's unsigned ``key`` field only words the message (a header whose signature holds
verifies whatever it says); the verifier still imports no Django and no models (the subprocess test of
tests/audit/test_trail_export.py, and here with ``--public-key``); an export made without a checkpoint key is
unsigned and says so (the command's output, the console). Derivation: the HKDF output equals RFC 5869 computed by
hand with ``hmac`` (checked once, pinned below as a known answer).

Not fixed: rotating the checkpoint key changes the public key (old files verify only with the public key of their
time; keep it with them); nothing publishes the key beyond the command and the console. The check is only as good
as the key the auditor took from toolhub (compare its fingerprint), as any public-key check is; a degenerate key (a
small-order point such as 32 zero bytes), under which a crafted signature passed, is refused since review ck.
"""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from tests.audit.test_console import member
from tests.security_review.trail_exports import acme_trail, export, public_key
from toolhub.audit_file_verify import main as verify_main
from toolhub.checkpoint_signature_core import hmac_hex

pytestmark = pytest.mark.django_db

KEY = "audit-test-key"
#: The public key ``KEY`` derives (RFC 5869 HKDF-SHA256 with the export info string, checked by hand once):
#: a change of derivation would orphan every file exported before it.
KEY_PUBLIC_HEX = "939b95adb53bb3f116faa4db5e602a24fac3bf772df0dcb316d1b8ffef8f8e42"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", KEY)
    return KEY


@pytest.fixture
def trail(db: None) -> None:
    acme_trail(3)


def public_key_output() -> str:
    out = io.StringIO()
    call_command("audit_public_key", stdout=out)
    return out.getvalue()


def rewrite(path: Path, target: Path, change) -> Path:  # type: ignore[no-untyped-def]
    header, *rest = path.read_text(encoding="utf-8").splitlines()
    document = json.loads(header)
    change(document)
    target.write_text("\n".join([json.dumps(document), *rest]) + "\n", encoding="utf-8")
    return target


def cut_tail(path: Path, target: Path) -> Path:
    """The newest event cut, the header rewritten to match (span and head): consistent, but not toolhub's header."""
    header, *events = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    last = max(events, key=lambda event: event["seq"])
    events.remove(last)
    for entry in header["chains"]:
        if entry["chain"] == last["chain"]:
            entry["to_seq"] -= 1
            entry["to_hash"] = last["prev_hash"]  # the hash the span now ends at
    header["heads"][str(last["chain"])] = {"seq": last["seq"] - 1, "hash": last["prev_hash"]}
    target.write_text("".join(json.dumps(line) + "\n" for line in [header, *events]), encoding="utf-8")
    return target


def verified_plain(path: Path) -> int:
    ran = subprocess.run(
        [sys.executable, "-m", "toolhub.audit_file_verify", str(path)], env=offline_env(), capture_output=True
    )
    return ran.returncode


def verified(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = verify_main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def offline_env() -> dict[str, str]:
    """An auditor's machine: no Django settings, no database, and no checkpoint key anywhere."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO", "DATABASE", "TOOLHUB", "AUDITOR"))
    }


# --- 1. an auditor verifies with the public key alone -----------------------------------------------------------


def test_an_auditor_verifies_an_export_with_the_public_key_alone(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: the header could be checked only with ``--key-env`` naming a variable that holds the checkpoint key
    (the secret that signs checkpoints and headers). Expect: with the public key ``audit_public_key`` prints, an
    auditor's process that holds no secret, no Django settings and no database verifies the file, and a header
    cut to match a forged tail fails; the key is not in the public key's output."""
    path = export(tmp_path)
    printed = public_key_output()
    assert KEY not in printed and "fingerprint sha256:" in printed
    script = (
        "import sys; from toolhub.audit_file_verify import main; code = main(sys.argv[1:]); "
        "import django.conf; assert not django.conf.settings.configured; "
        "assert 'toolhub.models' not in sys.modules and 'django.db.models' not in sys.modules; sys.exit(code)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script, str(path), "--public-key", public_key()],
        env=offline_env(),
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    assert "the header is signed by the public key given" in ran.stdout and "verifies: " in ran.stdout

    key_file = tmp_path / "toolhub-audit.pub"
    key_file.write_text(printed, encoding="utf-8")  # the command's output, saved as it is
    forged = cut_tail(path, tmp_path / "forged.jsonl")
    assert verified_plain(forged) == 0  # consistent: only the signature tells
    for target, expected in ((path, 0), (forged, 1)):
        cli = subprocess.run(
            [sys.executable, "-m", "toolhub.audit_file_verify", str(target), "--public-key-file", str(key_file)],
            env=offline_env(),
            capture_output=True,
            text=True,
        )
        assert cli.returncode == expected, cli.stdout + cli.stderr
        assert "Traceback" not in cli.stderr
    assert "the header was altered after toolhub signed it" in cli.stderr


def test_the_console_shows_the_public_key_to_those_who_export(trail: None, key: str) -> None:
    """Found: the console's "Export trail" gave an auditor nothing to check a file's signature with but the secret.
    Expect: the audit page shows the public key (base64, hex, fingerprint) beside the export buttons."""
    call_command("toolhub_roles", verbosity=0)
    client = Client()
    client.force_login(member("acme-auditor", "acme", Group.objects.get(name="auditors")))
    page = client.get("/admin/toolhub/auditevent/").content.decode()
    assert 'id="audit-export-key"' in page and "--public-key" in page
    assert public_key() in page and KEY_PUBLIC_HEX in page and KEY not in page


def test_the_export_command_names_the_signing_key_and_how_to_verify(trail: None, key: str, tmp_path: Path) -> None:
    """Found: the export said to verify with no key at all. Expect: it names the signing key's fingerprint and the
    ``--public-key`` verification; the header's signature names the same key."""
    out = io.StringIO()
    call_command("audit_export", "--tenant", "acme", "-o", str(tmp_path / "f.jsonl"), stdout=out)
    fingerprint = next(line for line in public_key_output().splitlines() if "fingerprint" in line).split()[-1]
    assert fingerprint in out.getvalue() and "--public-key" in out.getvalue()
    header = json.loads((tmp_path / "f.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert header["signature"]["algorithm"] == "ed25519" and header["signature"]["key"] == fingerprint


def test_without_a_checkpoint_key_there_is_no_public_key_and_exports_say_they_are_unsigned(
    trail: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: nothing told an auditor whether an export could be checked at all. Expect: ``audit_public_key``
    refuses clearly without a key, and the export and the console say exports are not signed."""
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY", raising=False)
    with pytest.raises(CommandError, match="TOOLHUB_AUDIT_KEY"):
        call_command("audit_public_key", stdout=io.StringIO())
    out = io.StringIO()
    call_command("audit_export", "--tenant", "acme", "-o", str(tmp_path / "f.jsonl"), stdout=out)
    assert "NOT signed" in out.getvalue()
    call_command("toolhub_roles", verbosity=0)
    client = Client()
    client.force_login(member("acme-auditor", "acme", Group.objects.get(name="auditors")))
    assert "Exported files are NOT signed" in client.get("/admin/toolhub/auditevent/").content.decode()


# --- 2. bad input --------------------------------------------------------------------------------------------


def test_each_bad_key_or_signature_is_named_with_no_traceback(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: no public-key path existed. Expect: a wrong key, an HMAC-only (older) header, a missing or malformed
    signature and a modified header each fail (exit 1) with their own message; a malformed key, an unreadable key
    file, two keys at once and the replaced ``--key-env`` are usage errors (exit 2)."""
    path = export(tmp_path)
    genuine = public_key()
    code, output = verified(capsys, str(path), "--public-key", genuine)
    assert code == 0 and "signed by the public key given" in output

    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "another-checkpoint-key")
    other = public_key()
    code, output = verified(capsys, str(path), "--public-key", other)
    assert code == 1 and "not the public key given" in output and "audit_public_key" in output
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", KEY)

    from toolhub.checkpoint_signature_core import export_header_text

    def hmac_only(header: dict) -> None:  # as exported before public-key signing
        header["signature"] = hmac_hex(KEY.encode(), export_header_text(header))

    cases = {
        "hmac.jsonl": (hmac_only, "only an HMAC signature"),
        "none.jsonl": (lambda header: header.pop("signature"), "the header is not signed"),
        "null.jsonl": (lambda header: header.update(signature=None), "the header is not signed"),
        "alg.jsonl": (lambda header: header["signature"].update(algorithm="hmac"), "not an ed25519 signature"),
        "value.jsonl": (lambda header: header["signature"].update(value="!!"), "signature value is malformed"),
        "list.jsonl": (lambda header: header.update(signature=[1]), "not an ed25519 signature"),
        "modified.jsonl": (lambda header: header.update(exported_at="2020-01-01T00:00:00+00:00"), "was altered after"),
    }
    for name, (change, message) in cases.items():
        code, output = verified(capsys, str(rewrite(path, tmp_path / name, change)), "--public-key", genuine)
        assert code == 1 and message in output and "Traceback" not in output, (name, output)

    key_file = tmp_path / "bad.pub"
    key_file.write_text("not a key\n", encoding="utf-8")
    for argv, message in (
        (["--public-key", "abc"], "--public-key: 'abc'... is not an Ed25519 public key"),
        (["--public-key", genuine[:-4]], "is not an Ed25519 public key"),
        (["--public-key", "zz" * 32], "is not an Ed25519 public key"),
        (["--public-key-file", str(key_file)], "is not an Ed25519 public key"),
        (["--public-key-file", str(tmp_path / "missing.pub")], "--public-key-file: cannot read"),
        (["--public-key", genuine, "--public-key-file", str(key_file)], "not allowed with argument"),
        (["--key-env", "TOOLHUB_AUDIT_KEY"], "--key-env is no longer read"),
    ):
        code, output = verified(capsys, str(path), *argv)
        assert code == 2 and message in output and "Traceback" not in output, (argv, output)

    # hex works as well as base64, and spaces around a pasted key do no harm
    assert verified(capsys, str(path), "--public-key", f"  {KEY_PUBLIC_HEX.upper()} ")[0] == 0


# --- the derivation -----------------------------------------------------------------------------------------------


def test_the_export_key_is_derived_stably_and_apart_from_the_hmac_key() -> None:
    """Found: there was no key an auditor could hold without being able to sign. Expect: the Ed25519 key is the same
    for the same checkpoint key in another process (and the pinned known answer), is not the checkpoint key nor
    any HMAC under it, and another checkpoint key gives another public key."""
    from cryptography.hazmat.primitives import serialization

    from toolhub.audit_export_key import EXPORT_KEY_INFO, export_signing_key, public_key_text

    here = public_key_text(export_signing_key(KEY.encode()).public_key())
    assert here.hex == KEY_PUBLIC_HEX
    script = (
        "import sys; from toolhub.audit_export_key import export_signing_key, public_key_text; "
        "print(public_key_text(export_signing_key(sys.argv[1].encode()).public_key()).hex)"
    )
    env = {**offline_env(), "PYTHONHASHSEED": "12345"}
    ran = subprocess.run([sys.executable, "-c", script, KEY], env=env, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == here.hex, ran.stderr

    private = export_signing_key(KEY.encode()).private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    assert private != KEY.encode() and private.hex() not in {
        hmac_hex(KEY.encode(), text) for text in ("", EXPORT_KEY_INFO.decode(), "toolhub-audit-export-header/1")
    }
    other = public_key_text(export_signing_key(b"another checkpoint key").public_key())
    assert other.hex != here.hex and other.fingerprint != here.fingerprint
    assert here.fingerprint.startswith("sha256:") and len(here.fingerprint) == len("sha256:") + 16
