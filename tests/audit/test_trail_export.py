"""A tenant's own audit chains leave as a file (``audit_export``, the console) that verifies offline.

``python -m toolhub.audit_file_verify`` recomputes every hash with toolhub's own functions, without a
database or Django settings, and names each kind of tampering by chain and seq.
"""

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from tests.audit.test_console import member
from toolhub import audit_hash_core
from toolhub.audit import audit_append
from toolhub.audit_file_verify import main as verify_main
from toolhub.audit_hash import tenant_chains
from toolhub.models import AuditEvent, Tenant

EXPORT_URL = "/admin/toolhub/toolcall/export-trail/"
CALLS = (uuid.UUID(int=1), uuid.UUID(int=2))


@pytest.fixture
def auditors(db: None) -> Group:
    call_command("toolhub_roles", verbosity=0)
    return Group.objects.get(name="auditors")


@pytest.fixture
def trails(db: None) -> None:
    """acme and globex with events in two chains each (one per call id), and one of the platform."""
    for slug in ("acme", "globex"):
        Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})
        for number in range(6):
            for call_id in CALLS:
                audit_append(
                    event_type="call.requested",
                    actor="agent:test",
                    data={"n": number, "secret_of": slug, "text": "naïve ✓"},
                    call_id=call_id,
                    tenant=slug,
                )
    audit_append(event_type="platform.note", actor="system", data={"n": 0})


def export(tmp_path: Path, tenant: str = "acme", *options: str, name: str = "out.jsonl") -> Path:
    target = tmp_path / name
    call_command("audit_export", "--tenant", tenant, "-o", str(target), *options, stdout=io.StringIO())
    return target


def read(path: Path) -> tuple[dict, list[dict]]:
    header, *events = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return header, events


def write(path: Path, header: dict, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *events]), encoding="utf-8")
    return path


def verified(path: Path, *heads: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = verify_main([str(path), *(f"--head={head}" for head in heads)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# --- a genuine export ----------------------------------------------------------------------------------


def test_a_genuine_export_holds_every_hashed_column_in_chain_order_and_verifies(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = export(tmp_path)
    header, events = read(path)

    assert (header["format"], header["version"], header["tenant"]) == ("toolhub-audit-export", 1, "acme")
    order = [(event["chain"], event["seq"]) for event in events]
    assert order == sorted(order) and len({chain for chain, _ in order}) == 3  # its record: no call, shard 0
    assert [entry["chain"] for entry in header["chains"]] == sorted({chain for chain, _ in order})
    # the export's outcome is recorded once the file is in place: after it, not in it
    stored = {
        (e.chain, e.seq): e for e in AuditEvent.objects.filter(tenant="acme").exclude(event_type="audit.exported")
    }
    assert len(events) == len(stored) == 13  # 12 events and the export's own start
    for event in events:
        row = stored[(event["chain"], event["seq"])]
        assert (event["hash"], event["prev_hash"], event["data"]) == (row.hash, row.prev_hash, row.data)
    for entry in header["chains"]:
        chain_events = [event for event in events if event["chain"] == entry["chain"]]
        assert header["heads"][str(entry["chain"])] == {
            "seq": chain_events[-1]["seq"],
            "hash": chain_events[-1]["hash"],
        }
    # the export itself is in the trail, in the tenant's own chain
    for event_type in ("audit.export_started", "audit.exported"):
        record = AuditEvent.objects.get(event_type=event_type)
        assert (record.tenant, record.actor.startswith("cli:")) == ("acme", True)

    code, output = verified(path, events[-1]["hash"], capsys=capsys)
    assert code == 0 and "verifies: 13 events in 3 chain(s) of tenant acme" in output


def test_the_verifier_runs_without_django_settings_and_never_imports_the_models(trails: None, tmp_path: Path) -> None:
    path = export(tmp_path)
    script = (
        "import sys; from toolhub.audit_file_verify import main; code = main([sys.argv[1]]); "
        "import django.conf; assert not django.conf.settings.configured; "
        "assert 'toolhub.models' not in sys.modules and 'django.db.models' not in sys.modules; sys.exit(code)"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO", "DATABASE"))}
    ran = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "verifies: 13 events" in ran.stdout

    cli = subprocess.run(
        [sys.executable, "-m", "toolhub.audit_file_verify", str(path)], env=env, capture_output=True, text=True
    )
    assert cli.returncode == 0 and "verifies" in cli.stdout


# --- tampering ------------------------------------------------------------------------------------------


def test_an_edited_payload_is_reported_by_chain_and_seq(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, events = read(export(tmp_path))
    events[3]["data"] = events[3]["data"].replace("naïve", "naive")
    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)
    assert code == 1 and "naïve" in read(tmp_path / "out.jsonl")[1][3]["data"]
    assert f"chain {events[3]['chain']} seq {events[3]['seq']} (line 5): its hash does not match its content" in output


def test_a_deleted_line_is_reported_as_missing_seqs(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, events = read(export(tmp_path))
    gone = events.pop(2)
    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)
    assert code == 1
    assert f"seq {gone['seq']}..{gone['seq']} of chain {gone['chain']} are missing before it" in output


def test_a_deleted_first_line_is_reported_against_the_header(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, events = read(export(tmp_path))
    gone = events.pop(1)  # the first of a call's chain (the first line is the export's own record, alone in its chain)
    assert gone["seq"] == 1
    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)
    assert code == 1 and f"chain {gone['chain']} starts at seq 2, the header says at seq 1" in output


def test_swapped_lines_are_reported_as_reordered(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, events = read(export(tmp_path))
    events[2], events[3] = events[3], events[2]
    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)
    assert code == 1 and "lines were reordered" in output

    header, events = read(tmp_path / "out.jsonl")
    split = next(i for i, event in enumerate(events) if event["chain"] != events[0]["chain"])
    events = events[split:] + events[:split]  # the chains in the wrong order
    code, output = verified(write(tmp_path / "t2.jsonl", header, events), capsys=capsys)
    assert code == 1 and "resumes after chain" in output


def test_a_cut_tail_is_reported_against_the_header_and_against_a_head_kept_apart(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, events = read(export(tmp_path))
    last = events.pop()
    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)
    assert (
        code == 1
        and f"chain {last['chain']} ends at seq {last['seq'] - 1}, the header says at seq {last['seq']}" in output
    )

    # a forger who also rewrites the header consistently is caught only by a head kept apart from the file
    for entry in header["chains"]:
        if entry["chain"] == last["chain"]:
            entry["to_seq"] -= 1
            entry["to_hash"] = events[-1]["hash"]  # the hash the span now ends at
    header["heads"][str(last["chain"])] = {"seq": events[-1]["seq"], "hash": events[-1]["hash"]}
    forged = write(tmp_path / "t2.jsonl", header, events)
    assert verified(forged, capsys=capsys)[0] == 0
    code, output = verified(forged, f"{last['chain']}:{last['hash']}", capsys=capsys)
    assert code == 1 and f"the expected head {last['hash'][:16]}... is in chain {last['chain']} nowhere" in output
    code, output = verified(forged, last["hash"], capsys=capsys)
    assert code == 1 and "is in any chain of the file nowhere" in output


def test_a_forged_header_is_reported(trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header, events = read(export(tmp_path))
    other = {**header, "tenant": "globex"}  # claims another tenant's trail
    code, output = verified(write(tmp_path / "t.jsonl", other, events), capsys=capsys)
    assert code == 1 and "in an export of 'globex''s own chains: the line or the header's tenant was altered" in output

    chain = str(header["chains"][0]["chain"])
    other = json.loads(json.dumps(header))
    other["heads"][chain]["hash"] = "0" * 64
    code, output = verified(write(tmp_path / "t2.jsonl", other, events), capsys=capsys)
    assert code == 1 and f"chain {chain} seq" in output and "not the head the header names" in output

    other = json.loads(json.dumps(header))
    other["chains"].append({"chain": int(chain) + 4000, "from_seq": 1, "to_seq": 4})
    code, output = verified(write(tmp_path / "t3.jsonl", other, events), capsys=capsys)
    assert code == 1 and "the file holds none of its lines" in output


def test_a_signed_checkpoint_in_range_is_named_and_a_rewrite_below_it_is_reported(
    trails: None, tmp_path: Path, audit_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("audit_checkpoint", stdout=io.StringIO())
    header, events = read(export(tmp_path))
    checkpoint = header["checkpoint"]
    assert checkpoint is not None and set(checkpoint["heads"]) <= {str(chain) for chain in tenant_chains("acme")}
    assert len(checkpoint["heads"]) == 2  # acme's two chains only: nothing of globex's or the platform's
    code, output = verified(tmp_path / "out.jsonl", capsys=capsys)
    assert code == 0 and "compared with the heads of signed checkpoint" in output

    # cut back to before the checkpoint and the header rewritten to match: the checkpoint's head is missing
    chain = int(next(iter(checkpoint["heads"])))
    kept = [
        event for event in events if event["chain"] != chain or event["seq"] < checkpoint["heads"][str(chain)]["seq"]
    ]
    for entry in header["chains"]:
        if entry["chain"] == chain:
            entry["to_seq"] = checkpoint["heads"][str(chain)]["seq"] - 1
    header["heads"].pop(str(chain))
    code, output = verified(write(tmp_path / "t.jsonl", header, kept), capsys=capsys)
    assert code == 1 and f"chain {chain} ends at seq" in output and "named by signed checkpoint" in output


# --- tenants --------------------------------------------------------------------------------------------


def test_an_export_holds_nothing_of_another_tenant_or_the_platform(trails: None, tmp_path: Path) -> None:
    text = export(tmp_path).read_text(encoding="utf-8")
    header, events = read(tmp_path / "out.jsonl")
    assert {event["tenant"] for event in events} == {"acme"}
    assert all(event["chain"] in tenant_chains("acme") for event in events)
    assert "globex" not in text and "platform.note" not in text
    globex_hashes = set(AuditEvent.objects.exclude(tenant="acme").values_list("hash", flat=True))
    assert not any(digest in text for digest in globex_hashes)


def test_a_tenants_auditor_exports_their_own_trail_from_the_console_never_anothers(
    trails: None, auditors: Group, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acme = member("acme-auditor", "acme", auditors)
    globex = member("globex-auditor", "globex", auditors)
    client = Client()
    client.force_login(acme)
    page = client.get("/admin/toolhub/auditevent/").content.decode()
    assert 'id="audit-export-acme"' in page and "audit-export-globex" not in page

    response = client.post(EXPORT_URL, {"tenant": "acme"})
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    path = tmp_path / "console.jsonl"
    path.write_text(body, encoding="utf-8")
    assert "globex" not in body
    assert verified(path, capsys=capsys)[0] == 0
    assert AuditEvent.objects.get(event_type="audit.exported").actor == "user:acme-auditor"

    intruder = Client()
    intruder.force_login(globex)
    for tenant in ("acme", "nosuch", ""):
        assert intruder.post(EXPORT_URL, {"tenant": tenant}).status_code == 404
    assert intruder.get(EXPORT_URL, {"tenant": "globex"}).status_code == 405
    assert AuditEvent.objects.filter(event_type="audit.exported").count() == 1  # the refused ones left no record


def test_a_platform_auditor_picks_any_tenant(trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)
    assert 'id="audit-export-any"' in client.get("/admin/toolhub/auditevent/").content.decode()
    response = client.post(EXPORT_URL, {"tenant": "globex"})
    path = tmp_path / "globex.jsonl"
    path.write_text(b"".join(response.streaming_content).decode(), encoding="utf-8")
    header, events = read(path)
    assert header["tenant"] == "globex" and {event["tenant"] for event in events} == {"globex"}
    assert verified(path, capsys=capsys)[0] == 0
    mistyped = client.post(EXPORT_URL, {"tenant": "nosuch"}, follow=True)  # said on the console, not a 404 page
    assert "No tenant named &#x27;nosuch&#x27;" in mistyped.content.decode()


def test_staff_without_the_right_to_read_the_trail_cannot_export(trails: None, tmp_path: Path) -> None:
    clerk = member("clerk", "acme", Group.objects.create(name="nobody"))
    client = Client()
    client.force_login(clerk)
    assert client.post(EXPORT_URL, {"tenant": "acme"}).status_code == 403
    assert not AuditEvent.objects.filter(event_type="audit.exported").exists()


# --- ranges ---------------------------------------------------------------------------------------------


def test_a_range_mid_chain_verifies_from_its_first_lines_previous_hash(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, events = read(export(tmp_path, "acme", "--from-seq", "3", "--to-seq", "5"))
    assert {event["seq"] for event in events} == {3, 4, 5}
    assert header["range"]["from_seq"] == 3 and all(entry["from_seq"] == 3 for entry in header["chains"])
    code, output = verified(tmp_path / "out.jsonl", capsys=capsys)
    assert code == 0 and "is verified from seq 3: its previous hash" in output

    events[0]["prev_hash"] = "f" * 64  # the anchor altered: its own hash no longer matches
    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)
    assert code == 1 and "its hash does not match its content" in output


def test_a_time_range_exports_every_event_between_and_verifies(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    middle = AuditEvent.objects.filter(tenant="acme").order_by("created_at", "id")[4].created_at
    _, events = read(export(tmp_path, "acme", "--since", middle.isoformat()))
    calls = [event for event in events if event["event_type"] == "call.requested"]
    assert calls and all(event["seq"] >= 2 for event in calls) and len(calls) < 12
    assert verified(tmp_path / "out.jsonl", capsys=capsys)[0] == 0


# --- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--tenant", "nosuch"), "There is no tenant 'nosuch'"),
        (("--tenant", "acme", "--from-seq", "5", "--to-seq", "2"), "from-seq 5 is after to-seq 2"),
        (("--tenant", "acme", "--from-seq", "abc"), "from-seq must be a whole number"),
        (("--tenant", "acme", "--to-seq", "0"), "to-seq must be at least 1"),
        (("--tenant", "acme", "--since", "yesterday"), "since must be an ISO 8601 date and time"),
        (("--tenant", "acme", "--since", "2026-12-02", "--until", "2026-12-01"), "since must be before until"),
        (("--tenant", "acme", "--from-seq", "1", "--since", "2026-12-01T00:00Z"), "not both"),
    ],
)
def test_a_bad_tenant_or_range_is_refused_and_nothing_written_or_recorded(
    trails: None, tmp_path: Path, options: tuple[str, ...], message: str
) -> None:
    target = tmp_path / "out.jsonl"
    with pytest.raises(CommandError, match=message):
        call_command("audit_export", *options, "-o", str(target), stdout=io.StringIO())
    assert list(tmp_path.iterdir()) == []
    assert not AuditEvent.objects.filter(event_type="audit.exported").exists()


def test_a_tenant_whose_chains_another_tenant_shares_is_not_exported_on_its_own(
    trails: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two slugs from before chain bases were stored unique may share chains: heads and gaps would tell of the other."""
    Tenant.objects.filter(slug="globex").update(audit_chain_base=None)
    base = audit_hash_core.tenant_chain_base("acme")
    monkeypatch.setattr(audit_hash_core, "tenant_chain_base", lambda tenant: base)
    with pytest.raises(CommandError, match="may hold another tenant's events"):
        call_command("audit_export", "--tenant", "acme", "-o", str(tmp_path / "out.jsonl"), stdout=io.StringIO())
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_never_overwritten(trails: None, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("keep me", encoding="utf-8")
    with pytest.raises(CommandError, match="exists; nothing was exported"):
        call_command("audit_export", "--tenant", "acme", "-o", str(target), stdout=io.StringIO())
    assert target.read_text(encoding="utf-8") == "keep me"
    assert not AuditEvent.objects.filter(event_type="audit.exported").exists()


def test_a_malformed_range_from_the_console_is_a_bad_request_and_not_recorded(trails: None, auditors: Group) -> None:
    client = Client()
    client.force_login(member("acme-auditor", "acme", auditors))
    response = client.post(EXPORT_URL, {"tenant": "acme", "from_seq": "x"})
    assert response.status_code == 400 and b"from-seq must be a whole number" in response.content
    assert not AuditEvent.objects.filter(event_type="audit.exported").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        (b"", "the file is empty"),
        (b"\xff\xfe not text\n", "cannot read"),
        (b"not json at all\n", "line 1 is not JSON"),
        (b'{"format": "something-else"}\n', "is not a toolhub-audit-export header"),
        (
            b'{"format": "toolhub-audit-export", "version": 2, "tenant": "acme", "chains": [], "heads": {}}\n',
            "version 2",
        ),
        (b'{"format": "toolhub-audit-export", "version": 1, "tenant": "", "chains": [], "heads": {}}\n', "no tenant"),
    ],
)
def test_a_file_that_is_not_an_export_is_refused_clearly(
    tmp_path: Path, content: bytes | None, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.jsonl"
    if content is not None:
        path.write_bytes(content)
    code, output = verified(path, capsys=capsys)
    assert code == 1 and "ERROR:" in output and message in output


def test_a_line_that_is_not_json_or_not_an_event_is_reported(
    trails: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = export(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:-10]
    lines[3] = json.dumps({"chain": 1})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = verified(path, capsys=capsys)
    assert code == 1 and "line 3 is not JSON" in output and "line 4 is not an audit event as exported" in output
