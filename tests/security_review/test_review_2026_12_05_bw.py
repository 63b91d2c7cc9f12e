"""Review of 2026-12-05 (bw): the auditor's work end to end: browse, export, verify, catch tampering.

Findings:

1. Under ASGI (``uvicorn toolhub.asgi:application``, the README's production setup and the only one serving
   MCP) the call export was read whole into memory before its first byte left: Django consumes a synchronous
   ``StreamingHttpResponse`` iterator with ``sync_to_async(list)`` under ASGI, so a million-row export held
   every row (and its text) at once in the web worker. Now the export is a ``toolhub.downloads.StreamedResponse``
   whose async iteration takes one chunk at a time on the request's thread (the one holding the export's
   transaction and server-side cursor).

2. The whole trail's verification (``verify_audit``, and the record the console shows to those who cross tenants)
   named a cut, rewritten or wiped chain by its number alone: a tenant's chain number is 40 bits of a hash of its
   slug, so whoever read "chain 3575433058308100: the checkpoint's head (seq 3) is missing" could not tell whose
   trail it was, nor whose auditors to tell. Now ``audit_proof._whose`` names the tenant of each problem of a
   tenant's own chain (``acme's chain 3575433058308100: ...``); a tenant's record names only itself (a tenant's run
   maps only its own chains, without reading the list of tenants).

Checked and found holding (no test here, or covered by the earlier reviews named):
- Exports and verification output stay within the tenant boundary: the call export is scoped by the list's
  queryset, a ``?tenant=`` outside it is 400 (review aw), ``calls.exported`` names only its own tenant (ap); a
  tenant's verification record holds only its own chains' problems and the checkpoints' own (no chain named);
  the console hides the whole trail's count, problems and checkpoint numbers from tenant staff (the state and
  times only) and a tenant's own run shows its own count; Verify now for another tenant is 404 (tenant chains).
- Tampering: an altered, inserted or deleted event, a reordered pair (seq and previous hash are hashed), a cut
  tail with its head rewound (caught by the stored checkpoint, naming the newest event left), a forged or deleted
  checkpoint, a tampered ``audit_checkpoint -o`` file given to ``verify_audit --checkpoint`` (its HMAC fails) are
  all reported (reviews y, ac; probes g, j, k, x); a call's page re-verifies its own timeline.
- Auditors are read-only: view permissions only; the console writes nothing but ``calls.exported`` and a
  rate-limited verification request; cancel/result/rollback in the API answer 403 unless the call is their own
  (``call_may_operate``); the desk, sagas and runs admin refuse them (reviews j, af, w).
- Exports carry no raw arguments, context, result or error detail; sensitive and undeclared names are redacted, a
  retired tool's arguments withheld; CSV cells that start like formulas are quoted (probe a, reviews 04, ax).
- Under WSGI the export streams through a server-side cursor inside one transaction (tests/audit/test_console.py).

Not fixed (reported): an export does not verify on its own. The call export holds calls, not audit events, and
carries no hash, chain position or signature, so an auditor can neither re-verify it offline nor tell a tampered
file; the only exported, verifiable artifact is a checkpoint (``audit_checkpoint -o``), whose HMAC needs the
platform's key and which ``verify_audit --checkpoint`` compares with the live database, not with a file of events.
An offline-verifiable export (a tenant's own chains as JSON Lines with every hashed column, its heads signed, and
a verifier that needs no database) is a feature of its own, not a fix of this budget.
"""

import asyncio
import csv
import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.handlers.asgi import ASGIHandler
from django.core.management import CommandError, call_command

import toolhub.admin_audit
from tests.audit.conftest import append_events, audit_key, cut_chain_tail  # noqa: F401 - audit_key: a fixture
from tests.audit.test_console import auditors, member  # noqa: F401 - a fixture, registered by being imported
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditEvent, AuditVerification, CallStatus, Tenant, ToolCall

_CSRF = "a" * 32


def _asgi_post(user: User, path: str) -> tuple[int, list[bytes]]:
    """POST ``path`` as ``user`` through Django's ASGI handler (as uvicorn serves it); the status and body chunks."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value
    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"cookie", f"sessionid={session}; csrftoken={_CSRF}".encode()),
            (b"x-csrftoken", _CSRF.encode()),
            (b"content-length", b"0"),
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    status: list[int] = []
    chunks: list[bytes] = []
    delivered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body" and message.get("body"):
            chunks.append(message["body"])
            _SENT.append(_READ[0])

    asyncio.run(ASGIHandler()(scope, receive, send))
    return status[0], chunks


#: How many rows the export had read from the database so far, and that count at each chunk sent.
_READ = [0]
_SENT: list[int] = []


@pytest.mark.django_db(transaction=True)
def test_an_export_streams_under_asgi_instead_of_being_read_whole_first(
    auditors: Group,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: under ASGI Django read the export's whole iterator into a list before sending a byte (a million
    rows held in the worker at once). Expect: the header leaves before the rows are read, and chunks follow
    as rows are read; every row arrives."""
    auditor = member("aud", "acme", auditors)
    total = 1500
    ToolCall.objects.bulk_create(
        ToolCall(tool_name="crm_lookup_secure", status=CallStatus.SUCCEEDED, tenant="acme", arguments={})
        for _ in range(total)
    )
    real = toolhub.admin_audit.export_rows

    def counted(calls: Any) -> Iterator[Any]:
        for row in real(calls):
            _READ[0] += 1
            yield row

    monkeypatch.setattr(toolhub.admin_audit, "export_rows", counted)
    _READ[0] = 0
    _SENT.clear()

    status, chunks = _asgi_post(auditor, "/admin/toolhub/toolcall/export/csv/")

    assert status == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(chunks).decode())))
    assert len(rows) == total
    # the first chunk (the header) left before every row had been read from the database
    assert _SENT[0] < total, f"the first byte left only after all {_SENT[0]} rows were read"
    assert len(chunks) > 2
    assert AuditEvent.objects.filter(event_type="calls.exported", actor="user:aud").count() == 1


@pytest.mark.django_db
def test_a_truncated_tenant_chain_is_reported_naming_its_tenant(audit_key: str) -> None:  # noqa: F811
    """Found: the whole trail's verification named a cut chain by its number alone (``chain 4390...``: 40 bits
    of a hash of the slug), so whoever runs ``verify_audit`` could not tell whose trail was cut nor whom to warn.
    Expect: each problem of a tenant's own chain names that tenant (``acme's chain 123...: ...``); the tenant's
    own record says the same, and another tenant's record holds nothing of it."""
    for slug in ("acme", "globex"):
        Tenant.objects.create(slug=slug, name=slug)
    events = append_events(3)
    assert all(event.tenant == "acme" for event in events)
    audit_checkpoint_create()
    cut_chain_tail(events[0], *events[1:])

    err = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--no-progress", "--workers", "1", stdout=io.StringIO(), stderr=err)
    chain = events[0].chain
    assert f"acme's chain {chain}:" in str(failed.value)
    assert all(f"acme's chain {chain}:" in line for line in err.getvalue().splitlines() if f"chain {chain}" in line)
    own = AuditVerification.objects.get(tenant="acme")
    assert not own.ok and f"acme's chain {chain}:" in own.problems
    other = AuditVerification.objects.filter(tenant="globex").first()
    assert other is None or (other.ok and "acme" not in other.problems)
    # acme's own run (the console's Verify now) says it too
    with pytest.raises(CommandError, match=f"acme's chain {chain}: the checkpoint's head"):
        call_command("verify_audit", "--no-progress", "--tenant", "acme", stdout=io.StringIO(), stderr=io.StringIO())
