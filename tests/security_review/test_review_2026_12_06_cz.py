"""Review 2026-12-06 (cz): review cw's PostgreSQL statement and idle-in-transaction bounds, adversarially.

Findings (each fails on c14e7fb, passes with the fix):

1. An atomic tool's transaction takes an idle bound of the tool's timeout and a minute, in ms: a timeout past
   24.8 days (any positive number is accepted; the default up to 100 years) passed PostgreSQL's 2^31-1 ms, the
   ``set_config`` was refused and the call stayed ``running`` before its tool ran. The bound is now capped there.
2. A call's outcome is written after its tool's effects happened; a write that waited for its locks (a chain head
   held by another session's append) past the 60 s statement bound was cancelled: the outcome lost, the call left
   ``running``. ``toolhub.db_timeouts.written_past_bound`` makes a write cancelled by the bound again, in its own
   transaction without the statement bound (waiting as before the bound); used for every outcome write of a claimed
   call (non-atomic, an atomic tool's recorded failure, a batch's outcomes). No statement more unless it fired.

Checked and holding:
- An export stalled inside its reading's transaction past the idle bound (probed with ``audit_export`` and a writer
  that waited until the server ended its session): the ``FETCH`` fails, ``RecordedExport.fail`` closes the reading
  (Django closes the dead connection when the rollback fails) and records ``audit.export_failed`` on a new
  connection; the command re-raises the database error (the operator sees "terminating connection due to
  idle-in-transaction timeout"). Probed, not kept as a test (it holds).
- An atomic tool's own statement cancelled by the bound, or its record cancelled inside its transaction: a
  ``DatabaseError`` there is an ``_Undo`` with ``ATOMIC_ABORTED_MESSAGE`` (sanitized), its work rolled back, the
  failure written by ``written_past_bound`` (read from the code).
- ``connection_bounded`` runs on ``connection_created`` after Django set autocommit: the session ``set_config`` is
  committed at once, even when the connection's first use is inside ``atomic`` (read from the code). The bound
  reaches 2,147,483 s at most (``_env_int``'s maximum): 2,147,483,000 ms, within PostgreSQL's range.
- ``migrate``: ``pre_migrate`` is sent before any migration runs (the executor's reads of ``django_migrations``
  before it are short); ``RESET`` returns to the session default, which keeps the URL's startup ``options`` and the
  role's setting (a shorter bound stays). The demo has no setup command calling ``migrate``; ``examples/`` and
  ``benchmarks/`` call it through ``call_command`` (the same signal).
- ``toolhub.W010`` / ``W011``: ``.com.``, ``.com:443``, ``https://*.com.``, ``https://*.com:443`` and
  ``https://**.com`` are named (the port split off, the trailing dot stripped); IPv6 hosts (``[::1]``) never start
  with ``.`` nor hold ``*``; ``.xn--p1ai`` (one label) is named; ``https://*com`` is no wildcard for Django (an exact
  ``com``), not named. Multi-label public suffixes (``.co.uk``) are not named (documented).

Found, not fixed:
- ``audit_checkpoint`` waits for ``pg_advisory_xact_lock`` (another checkpoint being made, e.g. beat's while an
  operator runs one) under the 60 s statement bound: past it the second fails with the raw "canceling statement due
  to statement timeout". Not tested for lack of time.
- ``generate_calls`` (demo) holds the tenants' chain heads for its whole batch: real calls' outcome writes now wait
  past the bound and are retried unbounded (finding 2), as they waited before.
"""

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection, transaction
from django.db.backends.signals import connection_created
from django.test import override_settings

from tests.helpers import RequestCall
from tests.security_review.pg_races import dsn, in_thread, released_after_lock_wait
from tests.tenancy.conftest import make_user
from toolhub import ToolResult, tool
from toolhub.models import AuditEvent, CallStatus, Tenant
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db
postgres = pytest.mark.postgres

#: What ``yearly_ledger_close`` saw of its transaction's idle bound.
_seen_idle_bounds: list[str] = []


def _idle_bound_seen() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        _seen_idle_bounds.append(str(cursor.fetchone()[0]))


@tool(atomic=True, timeout=90 * 24 * 3600)
def yearly_ledger_close(year: int) -> ToolResult:
    """Close a year's ledger; allowed a quarter of a year."""
    _idle_bound_seen()
    return ToolResult.text("closed")


@pytest.fixture
def _huge_tool() -> Iterator[None]:
    _seen_idle_bounds.clear()
    with registry.temporarily(yearly_ledger_close):
        yield


@postgres
@pytest.mark.usefixtures("_huge_tool")
def test_an_atomic_tool_with_a_timeout_past_postgres_range_still_runs(
    tenant: Tenant, request_call: RequestCall
) -> None:
    """Found: an atomic tool's timeout (any positive number, up to 100 years for the default) and a minute, in ms, was
    set as its transaction's idle bound: past 2^31-1 ms (24.8 days) PostgreSQL refused the value, the call failed
    before its tool ran. Expect: the bound is capped at PostgreSQL's largest, the call succeeds."""
    connection_created.send(sender=type(connection), connection=connection)  # as when it opened

    call = request_call("yearly_ledger_close", {"year": 2026}, make_user("al", tenant=tenant), tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert _seen_idle_bounds == ["2147483647ms"]


#: Another session holding every chain head (an append not yet committed), opened by ``send_notice``.
_lockers: list[psycopg.Connection] = []


@tool
def send_notice(text: str) -> ToolResult:
    """Send a notice (an effect outside the database); meanwhile another session appends to the trail."""
    locker = psycopg.connect(**dsn())
    locker.execute("SELECT seq FROM toolhub_auditchainhead FOR UPDATE")
    _lockers.append(locker)
    return ToolResult.text("sent")


@pytest.fixture
def _notice_tool() -> Iterator[None]:
    with registry.temporarily(send_notice):
        yield
    for locker in _lockers:
        locker.close()
    _lockers.clear()
    connection.close()  # its bound was set for the test: the flush after it runs unbounded


@postgres
@pytest.mark.django_db(transaction=True)
@override_settings(DATABASE_STATEMENT_TIMEOUT=1)
@pytest.mark.usefixtures("_notice_tool")
def test_a_call_outcome_waiting_for_a_lock_past_the_statement_bound_is_still_recorded(
    request_call: RequestCall,
) -> None:
    """Found: a call's outcome is written after its tool's effects happened; when that write waited for its locks (a
    chain head another session's append held) past the statement bound, it was cancelled: the outcome was lost and
    the call left ``running`` (the notice sent, its result nowhere; the lease sweep later finds it unknown). Expect:
    the write cancelled by the bound is made again without it, waiting for the lock; the call succeeds."""
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "ACME Corp"})
    user = make_user("al", tenant=tenant)
    connection.close()  # the next statement opens a connection bounded as toolhub's are
    releaser, released = in_thread(lambda: released_after_lock_wait(1.5, _lockers), name="releaser")

    call = request_call("send_notice", {"text": "hi"}, user, tenant="acme")
    releaser.join()

    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert released == [None]  # the write waited for the lock past the bound, and was released
    assert AuditEvent.objects.filter(call_id=call.id, event_type="call.succeeded").count() == 1
