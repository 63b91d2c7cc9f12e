"""Review 2026-12-06 (dy): approval notifications and webhooks, read as a webhook receiver, a tenant's operator, a
member whose call is held and a reader of the database or its backups.

Each test fails on the reviewed code (main at c47168e); its docstring says "Found: ..." and "Expect: ...". Every
mail server here is a local fake on a free port of 127.0.0.1.

Findings:

1. The approvers' e-mails went out as one batch (``send_messages``) whose first failure ended it: one approver whose
   address the mail server refuses (``550 no such user``: a mailbox closed while the account stays active, a typo)
   left every approver after them (by id) without the e-mail, and the request waited unannounced until it expired.
   Fixed: each approver's message is sent on its own over the one connection; a refused one is logged
   (``approvals.notifications``) and the others go out.
2. No ``EMAIL_TIMEOUT`` was set, so Django's SMTP backend waited on its socket without a bound: a mail server that
   accepts the connection and never answers (overloaded, a firewall dropping replies) held the worker until Celery's
   soft time limit (300 s by default) for each request that arrived or escalated, and the request thread for ever in
   the embedded mode, where tasks run eagerly. Fixed: ``EMAIL_TIMEOUT`` (environment, 10 s by default, as a webhook
   attempt's) bounds each wait.

Checked and found holding (no test here; reviews ai, dt, dx, ea, eb, h, al, l and their probes hold most as tests):

- Content: the e-mail names tool, tenant slug, risk, reason, requester, agent and the approvals still needed, never
  arguments, presets or context; a code rule's reason is scrubbed of the call's withheld (sensitive) values before it
  is stored, so neither the e-mail nor the webhook payload carries them; an operators' rule's reason is its name. Every
  value is one visible line (``visible_line``), the subject too (no CR/LF header injection; Django refuses one anyway);
  the message is plain text (no HTML to inject). Webhook payloads carry ids, tool, status, reason, tenant slug, round,
  the keyed arguments hash and, for decisions, the decider's username and comment; ``run.message`` the model's
  message, the run, agent, tenant and user id: nothing another tenant's staff read.
- Recipients: one message per approver (nobody sees the others), only ``approvers_still_counting`` of the request's
  tenant (members, or holders of ``toolhub.cross_tenant``; escalation adds the fallback group within that set), never
  the requester or who asked for a compensation.
- The link is ``TOOLHUB["CONSOLE_URL"]`` + the page's path (``console_link``); no request's Host is read (nothing in
  the project builds an absolute URI from a request); with ``CONSOLE_URL`` empty the link is a path.
- Deliveries' admin: read-only, scoped by ``payload__tenant`` (a tenant's staff see their tenants' deliveries only),
  no retry action, exact search on the message id; the payload is shown, the webhook URL and secret never are.
- Signing: ``v1`` HMAC-SHA256 over ``{id}.{timestamp}.{body}``, a fresh timestamp per attempt, a ``msg_<uuid4>`` id
  stable across retries; the secret is read from the environment at each attempt, never stored, logged or shown;
  there is no inbound callback whose signature toolhub itself compares.
- Transport: the connection goes through ``guarded_create_connection`` (the remote MCP client's rule: loopback,
  private, link-local, reserved, IPv4-mapped/NAT64/6to4 IPv6 and numeric forms such as ``2130706433`` resolved and
  refused, checked as the name resolves at connect time); redirects are not followed; http(s) only; the answer's body
  is never read; an attempt is bounded at 10 s in all; attempts stop at ``WEBHOOK_MAX_ATTEMPTS`` with capped backoff;
  the stored error is cut to 500 characters and scrubbed of the URL's secret parts.
"""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals.notifications import approval_email_approvers
from tests.approvals.conftest import Hold, hold  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


@dataclass
class FakeMailServer:
    """A mail server on 127.0.0.1 that refuses some recipients, or never answers at all."""

    refused: set[str] = field(default_factory=set)
    silent: bool = False
    delivered: list[str] = field(default_factory=list)
    port: int = 0
    connections: list[socket.socket] = field(default_factory=list)


def _serve_one(server: FakeMailServer, connection: socket.socket) -> None:
    reader = connection.makefile("rb")

    def say(line: str) -> None:
        connection.sendall(line.encode() + b"\r\n")

    say("220 fake ESMTP")
    recipient = ""
    for raw in reader:
        command = raw.decode().strip()
        verb = command.split(" ", 1)[0].upper().split(":", 1)[0]
        if verb in ("EHLO", "HELO"):
            say("250 fake")
        elif verb == "RCPT":
            recipient = command.split("<", 1)[1].split(">", 1)[0]
            say("550 no such user" if recipient in server.refused else "250 OK")
        elif verb == "DATA":
            say("354 go on")
            for body in reader:
                if body in (b".\r\n", b".\n"):
                    break
            server.delivered.append(recipient)
            say("250 queued")
        elif verb == "QUIT":
            say("221 bye")
            break
        else:  # MAIL, RSET, NOOP
            say("250 OK")


@contextmanager
def mail_server(**options: Any) -> Iterator[FakeMailServer]:
    server = FakeMailServer(**options)
    listener = socket.create_server(("127.0.0.1", 0))
    server.port = listener.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server.connections.append(connection)
            if not server.silent:
                threading.Thread(target=_serve_one, args=(server, connection), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(2)
        listener.close()
        for connection in server.connections:
            connection.close()


@pytest.fixture
def smtp(settings: Any) -> Any:
    """Point Django's SMTP backend at a fake server; the timeout is left as the project's settings have it."""

    def use(server: FakeMailServer) -> None:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""

    return use


def test_one_refused_approver_address_does_not_silence_the_other_approvers(
    hold: Hold,  # noqa: F811
    operator: User,
    second_operator: User,
    smtp: Any,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: the messages went out as one batch whose first failure ended it: the mail server refusing the first
    approver's address (550) left the second without the e-mail. Expect: every other approver is mailed, and the
    refusal is logged with the request's id."""
    request = hold()  # mailed to the test outbox; the fake server is used from here on
    assert operator.pk < second_operator.pk
    with mail_server(refused={operator.email}) as server:
        smtp(server)
        sent = approval_email_approvers(request_id=request.pk, event="approval.requested")

    assert server.delivered == [second_operator.email]
    assert sent == 1
    assert f"approval request {request.pk}" in caplog.text


def test_a_mail_server_that_never_answers_holds_the_sender_for_a_bounded_time(
    hold: Hold,  # noqa: F811
    operator: User,
    smtp: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: no ``EMAIL_TIMEOUT``: a mail server accepting the connection and never answering held the sender (a
    worker, or the request in the embedded mode) until the connection was closed by someone else, here after 25 s.
    Expect: the wait is bounded by the settings' ``EMAIL_TIMEOUT`` (10 s), the failure logged, nothing raised."""
    request = hold()
    with mail_server(silent=True) as server:
        smtp(server)
        # Without a bound the sender would wait for ever: after 25 s the server drops the connection.
        watchdog = threading.Timer(25, lambda: [shut(connection) for connection in server.connections])
        watchdog.daemon = True
        watchdog.start()
        started = time.monotonic()
        try:
            sent = approval_email_approvers(request_id=request.pk, event="approval.requested")
        finally:
            watchdog.cancel()
        elapsed = time.monotonic() - started

    assert sent == 0
    assert elapsed < 20, f"the sender waited {elapsed:.1f} s on a silent mail server"
    assert f"Could not e-mail the approvers of approval request {request.pk}" in caplog.text


def shut(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
