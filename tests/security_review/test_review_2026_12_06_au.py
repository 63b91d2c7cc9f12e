"""Review au: "review the review" of the audit verification's kinds (TAMPERED / UNVERIFIABLE), from an auditor's side.

Findings:
- verify_audit in a process without TOOLHUB_AUDIT_KEY dropped the evidence it needs no key for: a stored checkpoint
  deleted from the middle of the numbering (or the newest ones, past what a recorded run compared with) was reported
  only as UNVERIFIABLE ("the key is not configured"), so whoever deleted checkpoints got the softer label.
- Deleting the newest stored checkpoint (with the tail it signed) after only a tenant's run (``verify_audit --tenant``,
  the console's "verify now") had compared with it verified clean: only whole-trail records were counted as witnesses.

Checked and holds (offline verifier, ``--public-key`` given, acme's export from ``trail_exports``): a changed line, a
duplicated line, lines reordered, a tail cut, a file cut to its header, beta's line spliced in: each TAMPERED, exit 1,
"does NOT verify"; more than MAX_PROBLEMS bad lines still fail, the rest counted by kind. A tail cut at a checkpoint's
head with the header's span, end hash and head rewritten to match is TAMPERED (the signature no longer matches).
acme's export holds none of beta's events or hashes (only acme's chains, heads and checkpoint entries). With the key
set, every database-side problem ``verify_audit`` reports is TAMPERED; the verdict line's "first:" names a TAMPERED
problem before an UNVERIFIABLE one.

Not fixed (inherent, reported): the labels cannot be adversarially robust about keys. A header rewritten consistently
(a cut tail) with its signature removed, replaced by an HMAC string, or with the unsigned ``signature.key`` hint set to
another fingerprint is UNVERIFIABLE, not TAMPERED; it still fails (exit 1), and an attacker could as well sign with a
key of their own, which nothing but the pinned public key tells apart from a rotated one. A replayed older genuine
export verifies (toolhub's word at its ``exported_at``; ``--head`` kept apart catches it). Without the key, a
checkpoint row whose ``acknowledged`` flag was set by hand is taken at its word (a gap before it is not accused).
"""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.audit.conftest import owner_tampering
from tests.security_review.trail_exports import acme_trail, export, public_key
from toolhub.audit import audit_append
from toolhub.audit_file_verify import MAX_PROBLEMS, main
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def _delete_checkpoint(seq: int) -> None:
    """An owner of the database deletes a stored checkpoint (on PostgreSQL past the append-only triggers)."""
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM toolhub_auditcheckpoint WHERE seq = %s", [seq])


def _verify_audit() -> tuple[str, str]:
    """verify_audit's stderr and its final verdict; it must fail."""
    err = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--no-progress", "--workers", "1", stdout=io.StringIO(), stderr=err)
    return err.getvalue(), str(failed.value)


def test_keyless_verify_audit_still_calls_a_deleted_checkpoint_tampered(
    audit_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: without the key, a checkpoint deleted from the numbering was reported only as UNVERIFIABLE.

    Expect: the gap in the numbering (which needs no key to see) is TAMPERED, beside the UNVERIFIABLE key line.
    """
    acme_trail(2)
    for _ in range(3):
        audit_checkpoint_create(full=True)
    _delete_checkpoint(2)
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")
    err, verdict = _verify_audit()
    assert "UNVERIFIABLE" in err
    assert any(line.startswith("TAMPERED ") and "#2 is missing" in line for line in err.splitlines()), err
    assert "first: stored checkpoint #2 is missing" in verdict


def test_keyless_verify_audit_still_calls_deleted_newest_checkpoints_tampered(
    audit_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: without the key, the newest checkpoints deleted (past what a recorded run compared with) were only
    UNVERIFIABLE.

    Expect: TAMPERED naming the checkpoint the recorded verification saw.
    """
    acme_trail(2)
    for _ in range(2):
        audit_checkpoint_create(full=True)
    call_command("verify_audit", "--no-progress", "--workers", "1", stdout=io.StringIO())
    _delete_checkpoint(2)
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")
    err, _ = _verify_audit()
    assert any(line.startswith("TAMPERED ") and "#2 is missing" in line for line in err.splitlines()), err


def _offline(path: Path, key: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([str(path), "--public-key", key])
    captured = capsys.readouterr()
    return code, captured.err


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_offline_attacks_on_lines_are_tampered_not_unverifiable(
    audit_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: nothing (holds). Expect: each edit of a signed export's lines is TAMPERED, exit 1, "does NOT verify"."""
    acme_trail(6)
    audit_checkpoint_create(full=True)
    path, key = export(tmp_path), public_key()
    assert _offline(path, key, capsys)[0] == 0
    lines = _lines(path)
    event = json.loads(lines[2])
    event["data"] = '{"n":99}'
    changed = [lines[0], lines[1], json.dumps(event) + "\n", *lines[3:]]
    edits = {
        "changed": changed,
        "duplicated": [*lines[:3], lines[2], *lines[3:]],
        "reordered": [*lines[:2], lines[3], lines[2], *lines[4:]],
        "cut": lines[:-2],
        "header only": lines[:1],
    }
    for name, edited in edits.items():
        target = tmp_path / f"{name}.jsonl"
        target.write_text("".join(edited))
        code, err = _offline(target, key, capsys)
        assert code == 1, name
        assert "does NOT verify" in err, name
        assert any(line.startswith("TAMPERED ") for line in err.splitlines()), (name, err)
        assert "UNVERIFIABLE" not in err, (name, err)


def test_offline_problems_past_max_still_fail(
    audit_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: nothing (holds). Expect: more than MAX_PROBLEMS bad lines fail, the rest counted as TAMPERED."""
    acme_trail(1)
    path, key = export(tmp_path), public_key()
    lines = _lines(path)
    path.write_text(lines[0] + "not json\n" * (MAX_PROBLEMS + 5) + "".join(lines[1:]))
    code, err = _offline(path, key, capsys)
    assert code == 1
    assert "TAMPERED ... and" in err
    assert f"does NOT verify: {MAX_PROBLEMS + 5}" in err


def test_deleting_the_newest_checkpoint_a_tenant_run_compared_with_is_tampered(audit_key: str) -> None:
    """Found: only whole-trail records counted: after `verify_audit --tenant acme` (or the console's "verify now")
    compared with checkpoint #2, deleting #2 with the tail it signed verified clean against #1.

    Expect: TAMPERED "stored checkpoint #2 is missing", as for a whole-trail record.
    """
    acme_trail(2)
    audit_checkpoint_create(full=True)
    acme_trail(2)
    audit_checkpoint_create(full=True)
    call_command("verify_audit", "--no-progress", "--workers", "1", "--tenant", "acme", stdout=io.StringIO())
    _delete_checkpoint(2)
    err, verdict = _verify_audit()
    assert any(line.startswith("TAMPERED ") and "#2 is missing" in line for line in err.splitlines()), err


def test_offline_splice_and_isolation(audit_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found: nothing (holds). Expect: acme's export holds none of beta's events or hashes; beta's line spliced into
    acme's file is TAMPERED; a consistent rewrite with the signature removed is UNVERIFIABLE and still fails."""
    Tenant.objects.create(slug="beta", name="beta")
    acme_trail(3)
    beta = [audit_append(event_type="call.requested", actor="b", data={"b": n}, tenant="beta") for n in range(3)]
    audit_checkpoint_create(full=True)
    path, key = export(tmp_path), public_key()
    text = path.read_text()
    assert "beta" not in text
    assert not any(event.hash in text for event in beta)
    beta_line = json.dumps(
        {
            "actor": "b",
            "call_id": None,
            "chain": beta[0].chain,
            "created_at": beta[0].created_at.isoformat(),
            "data": beta[0].data,
            "event_type": beta[0].event_type,
            "hash": beta[0].hash,
            "prev_hash": "",
            "run_id": None,
            "seq": 1,
            "status": "",
            "tenant": "beta",
            "tool_name": "",
        }
    )
    spliced = tmp_path / "spliced.jsonl"
    spliced.write_text(text + beta_line + "\n")
    code, err = _offline(spliced, key, capsys)
    assert code == 1 and "TAMPERED " in err and "does NOT verify" in err
    lines = _lines(path)
    header = json.loads(lines[0])
    header["signature"] = None
    stripped = tmp_path / "stripped.jsonl"
    stripped.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    code, err = _offline(stripped, key, capsys)
    assert code == 1 and "UNVERIFIABLE the header is not signed" in err and "does NOT verify" in err


def test_offline_tail_cut_at_a_checkpoint_with_the_header_rewritten(
    audit_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: nothing fixable (holds, and the inherent limit). Expect: a tail cut back to the signed checkpoint's head,
    the header's span, end hash and head rewritten to match, is TAMPERED; with the unsigned key hint changed too it
    is UNVERIFIABLE (not toolhub's key's word), and fails either way."""
    acme_trail(4)
    audit_checkpoint_create(full=True)
    acme_trail(2)
    path, key = export(tmp_path), public_key()
    lines = _lines(path)
    header = json.loads(lines[0])
    longest = max(header["chains"], key=lambda span: span["to_seq"])
    events = [json.loads(line) for line in lines[1:]]
    kept = [event for event in events if not (event["chain"] == longest["chain"] and event["seq"] > 4)]
    end = [event for event in kept if event["chain"] == longest["chain"]][-1]
    longest["to_seq"], longest["to_hash"] = 4, end["hash"]
    header["heads"][str(longest["chain"])] = {"seq": 4, "hash": end["hash"]}
    cut = tmp_path / "cut.jsonl"
    for hint, kind in ((None, "TAMPERED"), ("sha256:0000000000000000", "UNVERIFIABLE")):
        if hint is not None:
            header["signature"]["key"] = hint
        cut.write_text(json.dumps(header) + "\n" + "".join(json.dumps(event) + "\n" for event in kept))
        code, err = _offline(cut, key, capsys)
        assert code == 1 and "does NOT verify" in err
        assert err.startswith(f"{kind} the header"), err
