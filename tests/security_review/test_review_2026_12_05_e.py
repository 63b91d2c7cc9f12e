"""Review of 2026-12-05 (e): the offline-verifiable tenant audit export (``audit_export``, the console's "Export
trail", ``python -m toolhub.audit_file_verify``) as a forger, a careless operator and an auditor.

Each test failed on the reviewed code (main at 6b7a75b) and passes now.

Findings:

1. A failed export (the file unwritable or taken meanwhile, an error mid-stream, a console download cut off) left
   an ``audit.exported`` event claiming an export was made. The start is now recorded as ``audit.export_started``
   (before a line is read, so data that left in part is on record), and the outcome as ``audit.exported`` (with the
   events, bytes and SHA-256 of what left) or ``audit.export_failed`` (with the reason), for the command and the
   console alike (``audit_export.RecordedExport``).
2. The offline verifier could not check a checkpoint's signature (the stored one covers every tenant's heads and
   cannot leave), so a cut tail with the header rewritten to match verified. toolhub now signs the header (which
   holds the tenant's part of the checked checkpoint and the heads the export ends at) with the checkpoint key,
   domain-separated from checkpoint bodies (``checkpoint_signature_core``, Django-free, shared with
   ``checkpoint_signature``); ``--key-env NAME`` checks it offline (since review cj: an Ed25519 signature,
   ``--public-key``); without a key the verifier says plainly
   that signatures were not checked.
3. A checkpoint section naming a chain the file holds none of was skipped silently: a whole chain removed (with its
   header entries) verified. It is now a problem.
4. JSON was read leniently: a line with a key twice verified as its last value while other readers (jq's ``first``,
   a person) see the first; a header with ``Infinity`` or a checkpoint key like ``"²"`` crashed the verifier with a
   traceback; ``1.9`` or ``true`` passed for sequence numbers. Lines are now strict JSON with integer numbers.
5. ``--head`` given in upper case or with surrounding spaces (as copied from a page) was reported as a cut tail.
   Heads are now normalized, and a head that is not a hash is a usage error.
6. A huge line was read whole into memory (the verifier claims constant memory). Lines longer than
   ``MAX_LINE_CHARS`` are now reported without being held.

Checked and holding (no test here): another tenant's lines spliced in (by chain or tenant), the header's tenant
changed, reordered and repeated lines, ``NaN`` in the header (reported as malformed), chains out of order, a file
truncated mid-line or at a line boundary (against the header), non-UTF-8 bytes (a clear error, exit 1), an empty
file, a second header; the console refuses a tenant outside the viewer's boundary (404, nothing recorded), staff
without ``view_auditevent`` (403), GET (405); the export reads only the tenant's own chains. No CSV is written on
this path (JSON Lines only).

Not fixed: a console download whose last chunk was handed to the server but never reached the client is recorded
as ``audit.exported`` (the server cannot know). ``--actor`` of the command is self-declared (its runner holds the
database anyway).
"""

import io
import json
import tracemalloc
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.core.signals import request_finished
from django.db import close_old_connections
from django.test import Client, RequestFactory

from toolhub import audit_export as service
from toolhub.admin_audit_export import audit_export_view
from toolhub.audit import audit_append
from toolhub.audit_file_verify import main as verify_main
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db

EXPORT_URL = "/admin/toolhub/toolcall/export-trail/"
KEY = "audit-test-key"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", KEY)
    return KEY


def public_key() -> str:
    """The export public key (review cj: an auditor checks the header with it, never with the checkpoint key)."""
    out = io.StringIO()
    call_command("audit_public_key", stdout=out)
    return out.getvalue().splitlines()[-1]


@pytest.fixture
def trail(db: None) -> None:
    for slug in ("acme", "globex"):
        Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})
        for number in range(4):
            for call in (uuid.UUID(int=1), uuid.UUID(int=2)):
                audit_append(event_type="call.requested", actor="a", data={"n": number}, call_id=call, tenant=slug)


def export(tmp_path: Path, name: str = "out.jsonl") -> Path:
    target = tmp_path / name
    call_command("audit_export", "--tenant", "acme", "-o", str(target), stdout=io.StringIO())
    return target


def read(path: Path) -> tuple[dict, list[dict]]:
    header, *events = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return header, events


def write(path: Path, header: dict, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *events]), encoding="utf-8")
    return path


def verified(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = verify_main([*argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def outcomes() -> list[str]:
    return list(
        AuditEvent.objects.filter(event_type__startswith="audit.export")
        .order_by("id")
        .values_list("event_type", flat=True)
    )


# --- 1. a failed export is not recorded as made ----------------------------------------------------------------


@pytest.mark.parametrize("failure", ["taken meanwhile", "disk full", "database error"])
def test_a_failed_command_export_is_recorded_as_failed_not_as_made(
    trail: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """Found: ``audit_export`` recorded ``audit.exported`` before writing, so a file taken by another process
    meanwhile, a full disk or a database error mid-stream left the trail claiming an export was made.
    Expect: the start and ``audit.export_failed`` with the reason; no ``audit.exported``; no file left."""
    original = service.audit_export_lines
    target = tmp_path / "acme.jsonl"

    def failing(export: object):  # type: ignore[no-untyped-def]
        lines = original(export)  # type: ignore[arg-type]
        yield next(lines)
        if failure == "taken meanwhile":
            target.write_text("someone else's file")
            yield from lines
        elif failure == "disk full":
            raise OSError(28, "No space left on device")
        else:
            raise RuntimeError("connection lost")

    monkeypatch.setattr(service, "audit_export_lines", failing)
    with pytest.raises((CommandError, RuntimeError)):
        call_command("audit_export", "--tenant", "acme", "-o", str(target), stdout=io.StringIO())

    assert "audit.exported" not in outcomes()
    failed = AuditEvent.objects.get(event_type="audit.export_failed")
    assert failed.tenant == "acme" and json.loads(failed.data)["reason"]
    assert [p.name for p in tmp_path.iterdir()] == (["acme.jsonl"] if failure == "taken meanwhile" else [])


def test_a_console_download_cut_off_is_recorded_as_failed_and_a_whole_one_with_its_digest(trail: None) -> None:
    """Found: the console recorded ``audit.exported`` before streaming: a download the client abandoned after the
    header still read as an export made. Expect: a cut-off download is recorded as ``audit.export_failed``; a whole
    one as ``audit.exported`` with the SHA-256 of exactly what was sent."""
    import hashlib

    root = User.objects.create_superuser("root", "root@example.com", "pw")
    request = RequestFactory().post(EXPORT_URL, {"tenant": "acme"})
    request.user = root
    response = audit_export_view(request)  # as the server runs it (the test client would close it at the end)
    next(iter(response.streaming_content))  # the header, then the client goes away and the server closes it
    request_finished.disconnect(close_old_connections)  # keep the test's transaction open, as the test client does
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)
    assert outcomes() == ["audit.export_started", "audit.export_failed"]

    client = Client()
    client.force_login(root)
    response = client.post(EXPORT_URL, {"tenant": "acme"})
    body = b"".join(response.streaming_content)
    assert outcomes()[2:] == ["audit.export_started", "audit.exported"]
    done = json.loads(AuditEvent.objects.get(event_type="audit.exported").data)
    assert done["sha256"] == hashlib.sha256(body).hexdigest() and done["events"] == body.count(b"\n") - 1


# --- 2, 3. checkpoint signatures offline -----------------------------------------------------------------------


def test_an_auditor_with_the_key_checks_the_signature_offline(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the verifier could not check a signature at all; the header's checkpoint heads were the file's own
    word, so a cut tail with the header rewritten to match verified. Expect: ``--key-env NAME`` checks the header's
    signature (a lying checkpoint section, a stripped one, a rewritten header or another key fail); without a key
    the output says plainly that signatures were not checked. (Since review cj the key is the export public key,
    ``--public-key``, which cannot sign; ``--key-env`` with the checkpoint key is gone.)"""
    call_command("audit_checkpoint", stdout=io.StringIO())
    audit_append(event_type="call.requested", actor="a", data={"n": 9}, call_id=uuid.UUID(int=1), tenant="acme")
    path = export(tmp_path)
    genuine = public_key()
    code, output = verified(capsys, str(path), "--public-key", genuine)
    assert code == 0 and "the header is signed by the public key given" in output and "checkpoint #1" in output

    code, output = verified(capsys, str(path))
    assert code == 0 and "signatures were NOT checked" in output

    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "another-key")
    code, output = verified(capsys, str(path), "--public-key", public_key())
    assert code == 1 and "not the public key given" in output

    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", KEY)
    header, events = read(path)
    chain = next(iter(header["checkpoint"]["heads"]))
    header["checkpoint"]["heads"][chain]["seq"] -= 1  # a checkpoint section that lies
    code, output = verified(capsys, str(write(tmp_path / "t.jsonl", header, events)), "--public-key", genuine)
    assert code == 1 and "altered after toolhub signed it" in output

    header, events = read(path)
    header["checkpoint"] = None  # stripped so that nothing is compared with it
    code, output = verified(capsys, str(write(tmp_path / "t2.jsonl", header, events)), "--public-key", genuine)
    assert code == 1 and "altered after toolhub signed it" in output

    header, events = read(path)
    last = events.pop()  # the newest event (past the checkpoint) cut, the header rewritten to match
    for entry in header["chains"]:
        if entry["chain"] == last["chain"]:
            entry["to_seq"] -= 1
            entry["to_hash"] = last["prev_hash"]  # the hash the span now ends at
    header["heads"][str(last["chain"])] = {"seq": last["seq"] - 1, "hash": last["prev_hash"]}
    forged = write(tmp_path / "t3.jsonl", header, events)
    assert verified(capsys, str(forged))[0] == 0  # without the key it cannot be told
    code, output = verified(capsys, str(forged), "--public-key", genuine)
    assert code == 1 and "altered after toolhub signed it" in output

    header, events = read(path)
    header.pop("signature")
    code, output = verified(capsys, str(write(tmp_path / "t4.jsonl", header, events)), "--public-key", genuine)
    assert code == 1 and "the header is not signed" in output


def test_a_chain_the_checkpoint_names_removed_whole_is_reported(
    trail: None, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a checkpoint head of a chain the file holds none of was skipped: removing a whole chain with its
    header entries verified. Expect: the removed chain is named."""
    call_command("audit_checkpoint", stdout=io.StringIO())
    header, events = read(export(tmp_path))
    chain = int(next(iter(header["checkpoint"]["heads"])))
    events = [event for event in events if event["chain"] != chain]
    header["chains"] = [entry for entry in header["chains"] if entry["chain"] != chain]
    header["heads"].pop(str(chain))
    code, output = verified(capsys, str(write(tmp_path / "t.jsonl", header, events)), "--public-key", public_key())
    assert code == 1 and f"chain {chain}: signed checkpoint" in output and "the chain was removed" in output


# --- 4. strict JSON ---------------------------------------------------------------------------------------------


def test_a_line_with_a_key_twice_is_reported(trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found: a line holding ``data`` twice (a forged value first, the genuine one last) verified, while readers
    that keep the first value show the forged one. Expect: the line is reported as not strict JSON."""
    path = export(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace('"data":', '"data":"{\\"n\\":999}","data":', 1)
    forged = tmp_path / "t.jsonl"
    forged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = verified(capsys, str(forged))
    assert code == 1 and "line 3 is not strict JSON" in output and "'data' appears twice" in output


@pytest.mark.parametrize(
    ("where", "value"),
    [("to_seq", "Infinity"), ("to_seq", "1e400"), ("from_seq", "1.9"), ("checkpoint", None)],
)
def test_a_header_with_odd_numbers_is_reported_not_a_crash(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, value: str | None
) -> None:
    """Found: ``Infinity`` or ``1e400`` in the header's chain entries, or a checkpoint chain key like ``"²"``, ended
    the verifier in an ``OverflowError``/``ValueError`` traceback; ``1.9`` was read as seq 1.
    Expect: exit 1 naming the malformed header, no traceback."""
    path = export(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    if where == "checkpoint":
        header["checkpoint"] = {"seq": 1, "heads": {"²": {"seq": 1, "hash": "0" * 64}}}
        lines[0] = json.dumps(header)
    else:
        header["chains"][0][where] = "@@"
        lines[0] = json.dumps(header).replace('"@@"', value)  # type: ignore[arg-type]
    forged = tmp_path / "t.jsonl"
    forged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = verified(capsys, str(forged))
    assert code == 1 and ("malformed" in output or "not strict JSON" in output), output


# --- 5. heads as people copy them -------------------------------------------------------------------------------


def test_a_head_in_upper_case_with_spaces_is_the_same_head(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: ``--head " ABC...\\n"`` (copied with spaces, or upper case) was reported as a cut tail.
    Expect: the head is found; a head that is not a hash is a usage error (exit 2)."""
    path = export(tmp_path)
    _, events = read(path)
    last = events[-1]
    code, output = verified(capsys, str(path), f"--head= {last['hash'].upper()}\n")
    assert code == 0 and "is in the file" in output
    code, output = verified(capsys, str(path), f"--head={last['chain']}: {last['hash'].upper()} ")
    assert code == 0
    with pytest.raises(SystemExit) as exited:
        verify_main([str(path), "--head=not-a-hash"])
    assert exited.value.code == 2


# --- 6. huge lines ----------------------------------------------------------------------------------------------


def test_a_huge_line_is_reported_without_being_held(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a 48-million-character line was read whole into memory. Expect: it is reported as too long, and the
    verifier's peak memory stays well below its size."""
    path = export(tmp_path)
    with path.open("a", encoding="utf-8") as handle:
        chunk = "x" * (1024 * 1024)
        for _ in range(48):
            handle.write(chunk)
        handle.write("\n")
    capsys.readouterr()
    tracemalloc.start()
    try:
        code = verify_main([str(path)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    output = capsys.readouterr()
    assert code == 1 and "is longer than" in output.err
    assert peak < 40 * 1024 * 1024
