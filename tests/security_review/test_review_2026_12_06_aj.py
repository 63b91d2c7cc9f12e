"""Review 2026-12-06 (aj): what the offline export verifier calls a header it cannot check.

Each test fails on the reviewed code (main at 46bdd05) and passes after the fix.

Findings:

1. ``python -m toolhub.audit_file_verify`` printed every problem as ``TAMPERED``, including what it could not check
   and is no evidence of tampering: a header carrying only the HMAC signature of exports from before public-key
   signing, an unsigned header (exported where no checkpoint key was set), a header naming another signing key than
   the public key given. Now each problem carries its kind, the same ``TrailProblem`` / ``TAMPERED`` /
   ``UNVERIFIABLE`` as ``verify_audit`` (moved to the Django-free ``toolhub.audit_problem``, re-exported by
   ``toolhub.audit_proof``): those are ``UNVERIFIABLE`` and still fail (exit 1, as the README documents).

Checked and found holding:

- An altered line, a header modified after signing and a malformed signature stay ``TAMPERED``, beside an
  ``UNVERIFIABLE`` signature line when the header is unsigned too.
- A file checked with no public key, and a signed range from before spans named their end (no ``to_hash``), were
  never labelled ``TAMPERED``: both verify (exit 0, as documented) with a note saying what is the file's own word.
- The verifier still runs stand-alone: no Django settings, no database, no checkpoint key (subprocess below).

Noted: ``header_signature_problem`` now returns a ``TrailProblem`` (text and kind), so review ck's test reads its
``.text``. A forger can turn a TAMPERED header into an UNVERIFIABLE one (remove the signature, rename the unsigned
``key`` hint); the file still fails either way, which is why UNVERIFIABLE is never a pass.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security_review.trail_exports import acme_trail, export, public_key
from toolhub.audit_file_verify import main as verify_main
from toolhub.checkpoint_signature_core import export_header_text, hmac_hex

pytestmark = pytest.mark.django_db

KEY = "review-aj-key"


@pytest.fixture
def trail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", KEY)
    acme_trail(4)


def rewrite(path: Path, name: str, header_change=None, line_change=None) -> Path:  # type: ignore[no-untyped-def]
    header, *lines = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    if header_change is not None:
        header_change(header)
    if line_change is not None:
        line_change(lines[1])
    target = path.with_name(name)
    target.write_text("".join(json.dumps(line) + "\n" for line in [header, *lines]), encoding="utf-8")
    return target


def verified(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = verify_main(list(argv))
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).splitlines()


def hmac_only(header: dict) -> None:  # type: ignore[type-arg]
    """As exported before public-key signing."""
    header["signature"] = hmac_hex(KEY.encode(), export_header_text(header))


def alter_line(event: dict) -> None:  # type: ignore[type-arg]
    event["actor"] = "someone else"


def labelled(lines: list[str], text: str) -> set[str]:
    """The labels of the output lines naming ``text``."""
    return {line.split(" ", 1)[0] for line in lines if text in line}


def test_a_header_the_public_key_cannot_check_is_unverifiable_not_tampered(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: an HMAC-only header (an export from before public-key signing), an unsigned one (exported where no
    checkpoint key was set) and one naming another signing key were printed "TAMPERED ...", though none is evidence
    of tampering. Expect: labelled UNVERIFIABLE, no TAMPERED line, and the file still fails (exit 1)."""
    path = export(tmp_path)
    genuine = public_key()
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "another-checkpoint-key")
    other = public_key()
    cases = [
        (rewrite(path, "hmac.jsonl", hmac_only), genuine, "only an HMAC signature"),
        (rewrite(path, "none.jsonl", lambda header: header.pop("signature")), genuine, "the header is not signed"),
        (path, other, "not the public key given"),
    ]
    for file, key, message in cases:
        code, lines = verified(capsys, str(file), "--public-key", key)
        assert code == 1, (file.name, lines)
        assert labelled(lines, message) == {"UNVERIFIABLE"}, (file.name, lines)
        assert not any(line.startswith("TAMPERED") for line in lines), (file.name, lines)


def test_the_offline_verifier_labels_kinds_standing_alone(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: run as an auditor runs it (no Django settings, no database, no checkpoint key), an unsigned header
    read "TAMPERED the header is not signed". Expect: UNVERIFIABLE there too, exit 1, no traceback."""
    unsigned = rewrite(export(tmp_path), "none.jsonl", lambda header: header.pop("signature"))
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO", "DATABASE", "TOOLHUB", "AUDITOR"))
    }
    ran = subprocess.run(
        [sys.executable, "-m", "toolhub.audit_file_verify", str(unsigned), "--public-key", public_key()],
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "UNVERIFIABLE the header is not signed" in ran.stderr and "TAMPERED" not in ran.stderr


def test_tampered_lines_and_headers_stay_tampered(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: (the labels above). Expect: what is evidence of tampering keeps TAMPERED: an altered line (with an
    unsigned header, beside the UNVERIFIABLE signature line), a header modified after signing, a malformed
    signature."""
    path = export(tmp_path)
    key = public_key()
    both = rewrite(path, "both.jsonl", lambda header: header.pop("signature"), alter_line)
    code, lines = verified(capsys, str(both), "--public-key", key)
    assert code == 1
    assert labelled(lines, "the line was altered") == {"TAMPERED"}
    assert labelled(lines, "the header is not signed") == {"UNVERIFIABLE"}
    for name, change, message in (
        ("modified.jsonl", lambda header: header.update(exported_at="2020-01-01T00:00:00+00:00"), "altered after"),
        ("value.jsonl", lambda header: header["signature"].update(value="!!"), "signature value is malformed"),
        ("alg.jsonl", lambda header: header["signature"].update(algorithm="hmac"), "not an ed25519 signature"),
    ):
        code, lines = verified(capsys, str(rewrite(path, name, change)), "--public-key", key)
        assert code == 1 and labelled(lines, message) == {"TAMPERED"}, (name, lines)
    code, lines = verified(capsys, str(rewrite(path, "line.jsonl", line_change=alter_line)))
    assert code == 1 and labelled(lines, "the line was altered") == {"TAMPERED"}


def test_what_verifies_unvouched_is_a_note_not_a_problem(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: nothing (holds). Expect: a file given no key, and a signed range from before spans named their end,
    verify (exit 0 as documented) and say what is the file's own word in a note, never TAMPERED or UNVERIFIABLE."""
    from toolhub.audit_export_key import header_signature

    code, lines = verified(capsys, str(export(tmp_path)))
    assert code == 0 and labelled(lines, "signatures were NOT checked") == {"note:"}

    def older(header: dict) -> None:  # type: ignore[type-arg]
        for entry in header["chains"]:
            del entry["to_hash"]
        header["signature"] = header_signature(KEY.encode(), {k: v for k, v in header.items() if k != "signature"})

    ranged = rewrite(export(tmp_path, "--to-seq", "2", name="range.jsonl"), "older.jsonl", older)
    code, lines = verified(capsys, str(ranged), "--public-key", public_key())
    assert code == 0 and labelled(lines, "its lines are the file's own word") == {"note:"}, lines
    assert not any(line.startswith(("TAMPERED", "UNVERIFIABLE")) for line in lines)
