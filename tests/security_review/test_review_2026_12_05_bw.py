"""Review of 2026-12-05 (bw): the auditor's work end to end: browse, export, verify, catch tampering.

Findings:

1. Under ASGI (``uvicorn toolhub.asgi:application``, the README's production setup and the only one serving
   MCP) the call export was read whole into memory before its first byte left: Django consumes a synchronous
   ``StreamingHttpResponse`` iterator with ``sync_to_async(list)`` under ASGI, so a million-row export held
   every row (and its text) at once in the web worker. Now the export is a ``toolhub.downloads.StreamedResponse``
   whose async iteration takes one chunk at a time on the request's thread (the one holding the export's
   transaction and server-side cursor).

Checked and found holding (no test here, or covered by the earlier reviews named):
"""

import asyncio
import csv
import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.handlers.asgi import ASGIHandler

import toolhub.admin_audit
from tests.audit.test_console import auditors, member  # noqa: F401 - a fixture, registered by being imported
from toolhub.models import AuditEvent, CallStatus, ToolCall

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
