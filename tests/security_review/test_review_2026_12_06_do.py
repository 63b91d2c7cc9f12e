"""Review 2026-12-06 (do): the PostgreSQL time bounds of reviews cw, cz, dg and dm, adversarially.

Findings (each fails on dc76274, passes with the fix):

1. An atomic tool's transaction stays idle while the tool works, up to its timeout: ``transaction_idle_at_least``
   lengthened the transaction's idle bound only when toolhub's *setting* was shorter than the timeout and a minute.
   A shorter bound the server, role, database or URL set (kept by design) or the server's bound under
   ``DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=0`` was never looked at: a tool well within its timeout had its session
   ended by it ("terminating connection due to idle-in-transaction timeout"), its work rolled back and the call failed,
   while a tool with a longer timeout had the same bound lengthened. The connection now keeps the idle bound it
   actually has (read when it opens, and again after ``migrate``'s ``RESET``), and the tool's transaction is
   lengthened past that one.

Checked and holding:
- A role, database or server bound is read in milliseconds whatever unit it was set in (``5min``, ``1h``, ``0``):
  ``pg_settings.setting`` is in the parameter's base unit; ``0`` is "none" and is replaced, never kept as shortest.
- ``SET LOCAL`` (``transaction_statements_unbounded``, ``written_past_bound``, ``transaction_idle_at_least``) ends
  with the outermost transaction, also when set inside a savepoint that is released; a rolled-back savepoint undoes
  it. Nothing of it reaches the next request or task on a persistent connection (``CONN_MAX_AGE``).
- ``operator_statements_unbounded`` is process-wide: nothing in a request or a Celery task calls ``call_command``
  (only ``load_demo`` runs ``toolhub_roles``, nested), so no served request runs unbounded because of it.
- Every management command of toolhub and the demo inherits ``OperatorCommand``; the governed account commands
  (Django's and axes') stay bounded (short writes). ``dbshell`` opens ``psql`` itself (no ``connection_created``):
  the server's bounds only.
- Settings: ``_env_int`` refuses negatives and values past 2,147,483 s with the setting named; 0 is "leave the
  server's", as documented.
- ``toolhub.W010`` / ``W011``: uppercase (``.COM``, ``HTTPS://*.Org``), a trailing dot and a port are named; a
  multi-label public suffix (``.co.uk``, ``*.github.io``) is not (documented by cz: it needs the public suffix list).
"""

import time
from collections.abc import Iterator

import pytest
from django.db import connection, connections
from django.db.backends.signals import connection_created
from django.test import override_settings

from tests.helpers import RequestCall
from tests.tenancy.conftest import make_user
from toolhub import ToolResult, tool
from toolhub.models import CallStatus, Tenant
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@tool(atomic=True, timeout=30)
def slow_reconciliation(account: str) -> ToolResult:
    """Reconcile an account: read it, work on it for a few seconds, write the result."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        time.sleep(3)  # the transaction sits idle meanwhile, well within the tool's 30 s
        cursor.execute("SELECT 2")
    return ToolResult.text(f"reconciled {account}")


@pytest.fixture
def _slow_tool() -> Iterator[None]:
    with registry.temporarily(slow_reconciliation):
        yield


@pytest.mark.usefixtures("_slow_tool")
@pytest.mark.parametrize("toolhub_idle_bound", [600, 0])
def test_an_atomic_tool_outlives_a_shorter_idle_bound_of_the_role(
    tenant: Tenant, request_call: RequestCall, toolhub_idle_bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the role's (server's, database's, URL's) idle bound, shorter than toolhub's setting or with the setting
    0, was kept for an atomic tool's transaction: a tool within its 30 s timeout, idle 3 s, had its session ended at
    the role's 2 s and failed. Expect: it succeeds, its transaction allowed its timeout and a minute."""
    wrapper = connections["default"]  # what it knows of its bound is put back with the test's transaction
    monkeypatch.setattr(wrapper, "toolhub_idle_bound_ms", getattr(wrapper, "toolhub_idle_bound_ms", None))
    with connection.cursor() as cursor:  # the role's bound, as the session starts with it (undone with the test)
        cursor.execute("SET idle_in_transaction_session_timeout = '2s'")
    with override_settings(DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=toolhub_idle_bound):
        connection_created.send(sender=type(connection), connection=connection)  # as when it opened
        with connection.cursor() as cursor:
            cursor.execute("SHOW idle_in_transaction_session_timeout")
            assert cursor.fetchone()[0] == "2s"  # the shorter bound is kept for the session

        call = request_call("slow_reconciliation", {"account": "a-1"}, make_user("al", tenant=tenant), tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
