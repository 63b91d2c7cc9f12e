"""Review 2026-12-06 (dm): operator commands and long work under the statement bound (reviews cw, cz, dg).

Findings (each fails on f8edb5e, passes with the fix):

1. Every operator command ran under the 60 s statement bound meant for requests and workers (only ``migrate`` and,
   since dg, the checkpoint's transaction were lifted): a statement of ``audit_export``, ``verify_audit``,
   ``generate_calls``, ``toolhub_db_roles``, ... that ran or waited for its locks past it failed with the raw
   "canceling statement due to statement timeout", its work lost (an export's start waiting on its tenant's chain
   head, held by a ``generate_calls`` batch or another long append; the README's advice was to rerun it with a
   larger ``DATABASE_STATEMENT_TIMEOUT``). ``toolhub.operator_command.OperatorCommand``, the base of toolhub's and the
   demo's commands, lifts the statement bound for every connection its process has or opens while it runs (its
   forked ``--workers`` too), back to what the server or role sets, as ``migrate`` does; after it, a connection open
   before gets its bound back and one opened during it toolhub's. The idle bound stays; requests and workers stay
   bounded (``toolhub.db_timeouts.operator_statements_unbounded``).

Measured on PostgreSQL 5M audit events (64 chains of 78k, rows of the chains interleaved as live traffic writes them)
and 1M calls, on 2 shared cores (EXPLAIN ANALYZE, cold):
- ``verify_audit``'s chains (recursive skip scan of ``(chain, seq)``): 3 ms. A whole chain of 78k read in one
  statement: 5.2 s; the walk reads it through a server-side cursor in a transaction, each ``FETCH`` a statement of
  a chunk, so no statement grows with the trail. ``audit_trail_events`` sums the heads, never ``COUNT(*)`` (2.6 s).
- ``audit_export --since/--until``: ``_span``'s ``MIN/MAX(seq)`` walks a chain's whole seq range filtered by time:
  1.3 s for 78k, linear: one statement per chain passes 60 s near 3.5M events in one chain (about 28M events of one
  tenant at 8 chains). Not a problem at the volume asked; lifted for the command now anyway.
- Sweeps at 1M calls: calls' redispatch / leases / awaiting under 10 ms, sagas 0.29 s (its slowest query), runs
  17 ms: indexed batches of at most 500, bounded as every worker's statement.
- ``generate_calls`` (demo): a 20,000-call batch (76,612 events) is one transaction of 27 s holding the tenants'
  chain heads: any append waiting on it (a real call's outcome: retried unbounded since cz; an operator command's:
  finding 1) waits that long; ``--batch-size 100000`` passes 60 s.
- ``toolhub_db_roles``' GRANTs and ``toolhub_roles`` are catalogue writes of milliseconds (read from the code);
  there is no retention or deletion command.

Checked and holding:
- ``verify_audit`` and ``audit_export`` read in chunks inside a transaction (a server-side cursor; outside one it
  would be ``WITH HOLD``, materialized whole in one statement); the sweeps read indexed batches of at most 500.
- A connection opened after an operator command (a request's, a worker's, in the same process) is bound again;
  one open before it gets its own bound back (asserted).
- A command whose session the server ended (idle bound, terminate) still fails with the server's error: giving the
  bound back skips a connection that cannot take a statement (a regression guard for the fix, it holds on f8edb5e).
- ``verify_audit --workers``' forked processes open their connections without the bound while the command runs
  (probed: ``SHOW statement_timeout`` in two forked pool workers gave ``0``, the parent's ``1s`` again after).
- Left bounded on purpose: ``runserver`` and the WSGI/ASGI server (requests), Celery tasks (the console's
  ``audit_verify_tenant_task`` reads in chunks too; beat's checkpoint lifts its own transaction, dg), and the wrapped
  commands of ``toolhub.governed_commands`` (Django's and axes' account commands: short writes).
- cw's, cz's and dg's tests pass unchanged.
"""

import io
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import OperationalError, connection, transaction
from django.test import override_settings

from tests.security_review.pg_races import dsn, in_thread, released_after_lock_wait
from toolhub.audit import audit_append
from toolhub.audit_hash import tenant_chains
from toolhub.models import AuditEvent, Tenant

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _closed_after() -> Iterator[None]:
    """Each test bounds its connection at 1 s: closed after it, the flush after it runs unbounded (even on failure)."""
    yield
    connection.close()


def _statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return str(cursor.fetchone()[0])


@override_settings(DATABASE_STATEMENT_TIMEOUT=1)
def test_an_operator_command_waiting_past_the_statement_bound_still_completes(tmp_path: Path) -> None:
    """Found: ``audit_export`` ran under the statement bound meant for requests: its start, waiting on the tenant's
    chain head held by another session past the bound, failed with the raw statement-timeout error, nothing
    exported. Expect: it waits and exports; a connection opened after it (a request's) is bound again."""
    Tenant.objects.create(slug="acme", name="acme")
    with transaction.atomic():
        audit_append(event_type="note", actor="system", data={}, tenant="acme")  # the chain the export's start takes
    chains = tenant_chains("acme")
    other = psycopg.connect(**dsn())  # an append in the tenant's chains, its transaction open
    other.execute(
        "SELECT seq FROM toolhub_auditchainhead WHERE chain >= %s AND chain < %s FOR UPDATE",
        [chains.start, chains.stop],
    )
    connection.close()  # the command opens a connection as toolhub's are opened
    target = tmp_path / "acme.jsonl"
    releaser, released = in_thread(lambda: released_after_lock_wait(1.5, [other]), name="releaser")
    try:
        call_command("audit_export", "--tenant", "acme", "-o", str(target), stdout=io.StringIO())
    finally:
        releaser.join()
        other.close()

    assert released == [None]  # the export waited past the bound, then went on
    assert target.exists()
    assert AuditEvent.objects.filter(tenant="acme", event_type="audit.exported").exists()
    connection.close()
    assert _statement_timeout() == "1s"  # a request's or worker's connection, after the command: bound


@override_settings(DATABASE_STATEMENT_TIMEOUT=1)
def test_a_connection_open_before_an_operator_command_is_unbounded_during_it_and_bound_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: an operator command's statements ran under the bound of the connection already open (its system
    checks', or a caller's). Expect: without the bound while the command runs; the same bound again after."""
    connection.close()
    assert _statement_timeout() == "1s"  # opened as a request's or worker's
    during: list[str] = []
    monkeypatch.setattr(
        "toolhub.management.commands.sync_tools.tool_catalogue_sync",
        lambda: during.append(_statement_timeout()) or {"created": 0, "updated": 0, "removed": 0},
    )
    call_command("sync_tools", stdout=io.StringIO())

    assert during == ["0"]  # the server's own (unbounded here), as migrate's
    assert _statement_timeout() == "1s"


@override_settings(DATABASE_STATEMENT_TIMEOUT=1)
def test_an_operator_command_whose_session_the_server_ended_fails_with_the_servers_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: (in the fix as first written, never committed; holds on f8edb5e) the bound given back after a command
    ran on a connection the server had ended (an export idle past the idle bound, an administrator's terminate), its
    error hiding the command's own. Expect: the command fails with the server's error, the dead connection left."""

    def ended() -> dict[str, int]:
        with psycopg.connect(**dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"created": 0, "updated": 0, "removed": 0}

    connection.ensure_connection()
    monkeypatch.setattr("toolhub.management.commands.sync_tools.tool_catalogue_sync", ended)
    with pytest.raises(OperationalError, match="terminat"):
        call_command("sync_tools", stdout=io.StringIO())
