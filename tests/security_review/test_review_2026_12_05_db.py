"""Review of 2026-12-05 (db): can someone holding an export file make the offline verifier accept a tampered one?

Each test failed on the reviewed code (main at a677711) and passes now.

Findings:

1. A signed header pinned the file's lines only through the chain's head: a range that ends before it
   (``--to-seq``, ``--until``) named no hash at its end, so every line of the file could be rewritten consistently
   (each hash recomputed, each link kept) and ``--public-key`` still said the file verifies. Each chain entry of the
   header now carries ``to_hash``, the hash of the event the span ends at (signed with the rest); the verifier
   requires the line at ``to_seq`` to be that event. A signed file from before it (no ``to_hash``) whose span ends
   short of the head says that its lines are not vouched for.
2. A line (or the header) nested a hundred thousand brackets deep stopped the verifier with a RecursionError
   traceback; it is reported as not strict JSON (``_loads``), the header as not an export.
3. ``audit_export`` refused a tenant whose chains another slug may share (two slugs from before chain bases were
   stored unique) only when the other tenant was living: once the other was deleted (its slug retired with no
   stored base) the export went ahead with heads and gaps telling of the deleted tenant's events. Retired slugs are
   asked too (``_shares_chains``).

Checked and holding (no test here, or covered elsewhere): with ``--public-key`` a cut tail, a removed chain, a
removed, reordered or duplicated line in the middle, a header naming another tenant or range (signed), a header
signed by another deployment's key (names the key) all fail; a second header line is reported as not an event;
lines spliced from another tenant's export fail (chain not the tenant's, or tenant differs); a BOM makes line 1
"not JSON" (exit 1); CRLF endings read as LF (same content, same verdict; a lone CR splits a line into two that are
not JSON); unicode escapes (``\\u``) parse to the same text, same hash (a lone surrogate fails its hash, no
traceback); numbers past Python's 4300 digits are "not JSON", a float or a bool where an integer is due is reported;
a duplicate key or NaN is reported. A tenant-bound auditor exporting another tenant from the console gets 404 (review
ct, tests/audit/test_trail_export.py); the command has no user (shell access is the operators'). A retired slug is
never issued again (``Tenant._refuse_another_identity``: the slug but for case, or its chain base), so a new
tenant's auditors never get a deleted tenant's trail and verification never mixes them. ``--from-seq``/``--to-seq``
below 1, from after to, a range past the head (an empty, signed file), since not before until are refused or empty.
"""

import json
from pathlib import Path

import pytest

from tests.security_review.trail_exports import acme_trail, export, public_key
from toolhub.audit_file_verify import main as verify_main
from toolhub.audit_hash_core import HASHED_COLUMNS, hash_text
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "audit-test-key-db")
    return "audit-test-key-db"


@pytest.fixture
def trail(db: None) -> None:
    acme_trail(6)


def verified(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = verify_main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def rewritten_consistently(path: Path, target: Path, seq: int) -> Path:
    """The event at ``seq`` given other data, it and every line after it re-hashed and re-linked: no link broken."""
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    previous = None
    for event in events:
        if event["seq"] == seq:
            event["data"] = json.dumps({"n": "forged"})
        if event["seq"] >= seq:
            if previous is not None:
                event["prev_hash"] = previous["hash"]
            event["hash"] = hash_text(*(event[column] for column in HASHED_COLUMNS))
        previous = event
    target.write_text("\n".join([header, *(json.dumps(event) for event in events)]) + "\n", encoding="utf-8")
    return target


@pytest.mark.parametrize("scope", [("--to-seq", "4"), ("--from-seq", "2", "--to-seq", "5")])
def test_a_range_ending_before_the_head_cannot_be_rewritten_under_a_signed_header(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], scope: tuple[str, ...]
) -> None:
    """Found: a --to-seq export's lines rewritten consistently verified with --public-key (nothing pinned its end).

    Expect: the header names the hash its span ends at, so the rewrite fails; the genuine file verifies.
    """
    path = export(tmp_path, *scope)
    code, output = verified(capsys, str(path), "--public-key", public_key())
    assert code == 0, output
    forged = rewritten_consistently(path, tmp_path / "forged.jsonl", seq=3)
    code, output = verified(capsys, str(forged), "--public-key", public_key())
    assert code == 1, output
    assert "seq 3" in output or "ends at" in output or "to_hash" in output or "not the event" in output, output


def test_a_signed_range_from_before_spans_named_their_end_says_its_lines_are_unvouched(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: an older signed range export (no ``to_hash``) read as "toolhub exported these chains" whatever its lines.

    Expect: it still verifies (nothing in it is wrong), but the verifier says its lines are the file's own word.
    """
    from toolhub.audit_export_key import header_signature

    path = export(tmp_path, "--to-seq", "4")
    header_text, *lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(header_text)
    for entry in header["chains"]:
        del entry["to_hash"]
    header["signature"] = header_signature(key.encode(), {k: v for k, v in header.items() if k != "signature"})
    older = tmp_path / "older.jsonl"
    older.write_text("\n".join([json.dumps(header), *lines]) + "\n", encoding="utf-8")
    code, output = verified(capsys, str(older), "--public-key", public_key())
    assert code == 0, output
    assert "its lines are the file's own word" in output


def test_a_deeply_nested_line_is_reported_not_a_traceback(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a line of a hundred thousand nested brackets stopped the verifier with a RecursionError traceback.

    Expect: an event line so nested is reported as not strict JSON (exit 1), a header so nested as not an export.
    """
    path = export(tmp_path)
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    nested = "[" * 100_000 + "]" * 100_000
    planted = tmp_path / "planted.jsonl"
    planted.write_text("\n".join([header, *lines, nested]) + "\n", encoding="utf-8")
    code, output = verified(capsys, str(planted), "--public-key", public_key())
    assert code == 1 and f"line {len(lines) + 2} is not strict JSON" in output, output
    planted.write_text("\n".join([nested, *lines]) + "\n", encoding="utf-8")
    code, output = verified(capsys, str(planted))
    assert code == 1 and "line 1 is not strict JSON" in output, output


def test_a_tenant_whose_chains_a_deleted_tenant_may_share_is_not_exported_on_its_own(
    trail: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the shared-chains refusal asked only living tenants: a deleted one (its slug retired, with no stored base,
    from before bases were kept unique) whose slug derives the same chains let its heads and gaps out with the other's.

    Expect: refused, as for a living tenant that may share them; nothing written.
    """
    from django.core.management.base import CommandError

    from toolhub import audit_hash_core

    Tenant.objects.create(slug="globex", name="globex")
    Tenant.objects.filter(slug="globex").update(audit_chain_base=None)
    Tenant.objects.get(slug="globex").delete()
    base = audit_hash_core.tenant_chain_base("acme")
    monkeypatch.setattr(audit_hash_core, "tenant_chain_base", lambda tenant: base)
    with pytest.raises(CommandError, match="may hold another tenant's events"):
        export(tmp_path)
    assert list(tmp_path.iterdir()) == []
