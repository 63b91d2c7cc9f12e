"""Review 2026-12-06 bl: the read-mostly surfaces (dashboard, calls export, audit console's lists and filters, the
desk's counts) as staff, an operator and an auditor of acme, with globex's calls beside them.

Each test failed on the reviewed code (main at b458c24) and passes now.

Findings:

1. A date range ending on the calendar's last day (``?created_to=9999-12-31``, what a "to the end" field may send)
   was a 500 on the calls' list, the events' list and the calls export (``OverflowError`` adding the day after it).
   Fixed in the shared ``admin_lists.DateRangeFilter``: a day at the calendar's edge bounds nothing.
2. The console's lists and the calls export took any pattern lookup on a column from the query string
   (``?error__regex=(a|aa)*$``, ``?error_detail__icontains=``, ``?actor__contains=``): each request had the database
   read and match every row of the viewer's tenants, as long as the (quadratic, on PostgreSQL unbounded) pattern
   made it, against the README's "every filter and search is an exact match on an index". Fixed in the shared
   ``admin_helpers.GuardedLookups``: beyond declared filters, only ``INDEXED_LOOKUPS`` (exact, in, isnull, ranges);
   any other lookup or transform answers 400.

Checked and holds (probes against the code as found, not kept as tests):
- The dashboard of acme's auditor counts acme's calls only: its "pending approvals", "calls by status", approval
  latency and chart (its lines and legend) name no tool that only globex calls (each reads ``scoped(...)``); it is
  shown only to holders of ``view_toolcall``; the platform's trail state shows state and times only.
- The calls' and events' lists and the desk's list, for acme's auditor, show nothing of globex; the tenant filter
  offers the viewer's tenants; ``?tenant=globex`` on the list or export lists/exports nothing (the query is scoped
  first); ``?user=<globex's user>`` and ``?agent=`` are exact and scoped; event-type choices (a scan of every
  tenant's types) are offered only to cross-tenant viewers; tool choices come from the (platform) catalogue.
- The export is a POST with CSRF, scoped at the query, streamed through a server-side cursor in chunks
  (``StreamedResponse`` under ASGI too), redacts sensitive arguments as the pages do, never carries raw arguments,
  context, result or error detail, quotes formula-like CSV cells and is audited per tenant naming only that tenant.
- Search (``?q=``): a UUID (exact), a tool-name prefix resolved in Python against the catalogue (``%``/``_`` are
  literal there), else exact ``model_call_id``/``saga_id`` (both indexed): no LIKE reaches the database.
- Auditors (``toolhub_roles``) hold view permissions only: no cancel action on calls (needs ``change_toolcall``),
  no decide on the desk; their POSTs are the read-only export and "Verify now" (a queued, per-minute-limited check).

Not fixed: an export has no row, byte or time cap and holds one transaction (a snapshot) open while a slow client
reads it (by design "every call the filters select"; a long export delays vacuum). No ``statement_timeout`` is set
by toolhub (left to the deployment's role or pooler). A very long ``?q=`` is echoed into every link of the list page
(about 150 times); the web server's request-line limit (gunicorn: 4 KiB) bounds it.
"""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests.helpers import RequestCall
from tests.tenancy.conftest import make_user
from toolhub import ToolResult, registry, tool
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


@tool
def ledger_note(text: str) -> ToolResult:
    """Write a note."""
    return ToolResult.text("noted")


@pytest.fixture(autouse=True)
def _tools() -> Iterator[None]:
    with registry.temporarily(ledger_note):
        yield


@pytest.fixture
def acme_auditor_client(
    tenant: Tenant, other_tenant: Tenant, request_call: RequestCall, roles: dict[str, Group]
) -> Client:
    """acme's auditor, with one call of acme's and one of globex's in the trail."""
    request_call("ledger_note", {"text": "acme"}, make_user("al", tenant=tenant), tenant="acme")
    request_call("ledger_note", {"text": "globex"}, make_user("gil", tenant=other_tenant), tenant="globex")
    client = Client(raise_request_exception=False)
    client.force_login(make_user("acme-aud", tenant=tenant, staff=True, groups=(roles["auditors"],)))
    return client


@pytest.mark.parametrize("query", ["created_to=9999-12-31", "created_from=0001-01-01&created_to=9999-12-31"])
def test_a_date_range_ending_on_the_calendars_last_day_lists_and_exports(
    acme_auditor_client: Client, query: str
) -> None:
    """Found: ``?created_to=9999-12-31`` was a 500 (OverflowError) on the calls' and events' lists and the export.
    Expect: the range bounds nothing past the calendar's edge: each page answers 200 with acme's rows."""
    for page in ("/admin/toolhub/toolcall/", "/admin/toolhub/auditevent/"):
        response = acme_auditor_client.get(f"{page}?{query}")
        assert response.status_code == 200, page
        assert response.context["cl"].result_count >= 1, page
    response = acme_auditor_client.post(f"/admin/toolhub/toolcall/export/jsonl/?{query}")
    assert response.status_code == 200
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == 1 and '"tenant": "acme"' in lines[0]


@pytest.mark.parametrize(
    "page, query",
    [
        ("/admin/toolhub/toolcall/", "error__regex=(a|aa)*$"),
        ("/admin/toolhub/toolcall/", "error_detail__icontains=x"),
        ("/admin/toolhub/toolcall/", "agent_name__iregex=.*"),
        ("/admin/toolhub/toolcall/", "tool_name__contains=_"),
        ("/admin/toolhub/toolcall/", "created_at__year=2026"),
        ("/admin/toolhub/auditevent/", "actor__contains=%"),
        ("/admin/toolhub/auditevent/", "hash__startswith=a"),
    ],
)
def test_lists_refuse_pattern_lookups_from_the_query_string(acme_auditor_client: Client, page: str, query: str) -> None:
    """Found: the lists answered any pattern lookup or transform on a column (200: a regex or LIKE matched over every
    row of the viewer's tenants, no index). Expect: 400, as for any lookup a list does not take."""
    assert acme_auditor_client.get(f"{page}?{query}").status_code == 400


def test_exports_refuse_pattern_lookups_and_keep_indexed_ones(acme_auditor_client: Client) -> None:
    """Found: the export ran ``?error__regex=`` over every call of the tenant. Expect: 400 for it; exact and range
    lookups on the indexes still export, and the index and the lists' declared filters still answer."""
    assert acme_auditor_client.post("/admin/toolhub/toolcall/export/csv/?error__regex=(a|aa)*$").status_code == 400
    for query in (
        "status__exact=succeeded",
        "tool_name=ledger_note",
        "created_at__gte=2000-01-01T00:00:00Z",
        "tenant__in=acme",
    ):
        response = acme_auditor_client.post(f"/admin/toolhub/toolcall/export/csv/?{query}")
        assert response.status_code == 200, query
        rows = b"".join(response.streaming_content).decode().splitlines()
        assert len(rows) == 2 and ",acme," in rows[1], (query, rows)
    for page in (
        "/admin/",
        "/admin/toolhub/toolcall/?status__exact=succeeded&tool=ledger_note&created_from=2000-01-01",
        "/admin/toolhub/auditevent/?event_type=call.requested&actor=x",
    ):
        assert acme_auditor_client.get(page).status_code == 200, page
