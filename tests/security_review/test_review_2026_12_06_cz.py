"""Review 2026-12-06 (cz): review cw's PostgreSQL statement and idle-in-transaction bounds, adversarially.

Findings (each fails on c14e7fb, passes with the fix):

Checked and holding:
"""

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from tests.helpers import RequestCall
from tests.tenancy.conftest import make_user
from toolhub import ToolResult, tool
from toolhub.models import CallStatus, Tenant
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
def test_an_atomic_tool_with_a_timeout_past_postgres_range_still_runs(tenant: Tenant, request_call: RequestCall) -> None:
    """Found: an atomic tool's timeout (any positive number, up to 100 years for the default) and a minute, in ms, was
    set as its transaction's idle bound: past 2^31-1 ms (24.8 days) PostgreSQL refused the value, the call failed
    before its tool ran. Expect: the bound is capped at PostgreSQL's largest, the call succeeds."""
    connection_created.send(sender=type(connection), connection=connection)  # as when it opened

    call = request_call("yearly_ledger_close", {"year": 2026}, make_user("al", tenant=tenant), tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert _seen_idle_bounds == ["2147483647ms"]
