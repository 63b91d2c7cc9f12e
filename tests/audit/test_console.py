"""The audit console: filters and id search on indexes, re-verified timelines, streaming exports, the dashboard."""

import csv
import io
import json
import uuid
from collections.abc import Iterator
from typing import Annotated

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection, transaction
from django.http import StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.audit.conftest import owner_tampering
from tests.helpers import console
from toolhub import Param, tool
from toolhub.admin_lists import EstimatedCountPaginator
from toolhub.audit import audit_call_event
from toolhub.audit_verify import verify_audit_chains
from toolhub.catalogue import tool_catalogue_sync
from toolhub.exports import WITHHELD
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall, ToolDefinition
from toolhub.synthetic import SyntheticSpec, generate_calls
from toolhub.tools.registry import registry

SECRET = "sk-console-secret-never-exported"


@tool(sensitive=("api_token",), risk="high")
def crm_lookup_secure(
    customer: Annotated[str, Param("The customer.")],
    api_token: Annotated[str, Param("The CRM token.")],
) -> dict:
    """Look a customer up with a token."""
    return {"customer": customer}


@pytest.fixture(autouse=True)
def _catalogue(db: None) -> Iterator[None]:
    with registry.temporarily(crm_lookup_secure):
        tool_catalogue_sync()
        yield


@pytest.fixture
def auditors(db: None) -> Group:
    call_command("toolhub_roles", verbosity=0)
    return Group.objects.get(name="auditors")


def member(username: str, slug: str, group: Group) -> User:
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.groups.add(group)
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


def make_call(tenant: str, *, tool_name: str = "crm_lookup_secure", status: str = CallStatus.SUCCEEDED, **fields):
    """A call with its audit events, written the way the pipeline writes them (one chain, same transaction)."""
    arguments = fields.pop("arguments", {"customer": "ACME", "api_token": SECRET})
    with transaction.atomic():
        call = ToolCall.objects.create(tool_name=tool_name, status=status, tenant=tenant, arguments=arguments, **fields)
        audit_call_event(call, "call.requested", actor="agent:test", data={"arguments": "redacted"})
        audit_call_event(call, f"call.{status}", actor="worker")
    return call


def rows_of(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- filters and search -------------------------------------------------------------------------------


def test_calls_are_filtered_by_tool_risk_status_agent_user_tenant_and_dates(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    alice = User.objects.create_user("alice")
    wanted = make_call("acme", agent_name="crm-bot", user=alice, model_call_id="call_wanted")
    other_tool = make_call("acme", tool_name="get_order", status=CallStatus.FAILED, agent_name="order-bot")
    client = console(auditor)
    base = "/admin/toolhub/toolcall/"

    cases = {
        "?tool=crm_lookup_secure": (wanted, other_tool),
        "?risk=high": (wanted, other_tool),
        "?status__exact=failed": (other_tool, wanted),
        "?agent=crm-bot": (wanted, other_tool),
        "?user=alice": (wanted, other_tool),
        "?tenant=acme&tool=get_order": (other_tool, wanted),
        f"?created_from={wanted.created_at.date()}&created_to={wanted.created_at.date()}": (wanted, None),
    }
    for query, (shown, hidden) in cases.items():
        body = rows_of(client, base + query)
        assert str(shown.pk) in body, query
        if hidden is not None:
            assert str(hidden.pk) not in body, query
    assert str(wanted.pk) not in rows_of(client, base + "?created_to=2000-01-01")
    # a malformed day is ignored, not an error
    assert str(wanted.pk) in rows_of(client, base + "?created_from=not-a-day")


def test_calls_are_found_by_call_id_run_id_correlation_id_and_tool_prefix(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    run_id = uuid.uuid4()
    wanted = make_call("acme", run_id=run_id, model_call_id="call_abc123")
    other = make_call("acme", tool_name="get_order", model_call_id="call_other")
    client = console(auditor)

    for term in (str(wanted.pk), str(run_id), "call_abc123", "crm_look", "CRM_LOOKUP"):
        body = rows_of(client, f"/admin/toolhub/toolcall/?q={term}")
        assert str(wanted.pk) in body and str(other.pk) not in body, term
    # a part of an id is not a heap-scanning substring search: nothing found
    body = rows_of(client, "/admin/toolhub/toolcall/?q=abc123")
    assert str(wanted.pk) not in body and "0 tool calls" in body


def test_audit_events_are_filtered_and_found_by_call_id(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    wanted, other = make_call("acme"), make_call("acme", tool_name="get_order")
    client = console(auditor)

    body = rows_of(client, f"/admin/toolhub/auditevent/?q={wanted.pk}")
    assert body.count(f"/admin/toolhub/toolcall/{wanted.pk}/change/") == 2 and str(other.pk) not in body
    body = rows_of(client, "/admin/toolhub/auditevent/?event_type=call.requested&tool=get_order")
    assert str(other.pk) in body and str(wanted.pk) not in body
    body = rows_of(client, "/admin/toolhub/auditevent/?actor=worker")
    assert str(other.pk) in body and "agent:test" not in body.split('id="result_list"')[1]


@pytest.mark.postgres  # the filter choices come from PostgreSQL's index skip scan and planner estimates
def test_change_lists_never_scan_for_distinct_values_or_count_the_whole_table(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    make_call("acme")
    client = console(auditor)

    for url in ("/admin/toolhub/toolcall/?status__exact=succeeded", "/admin/toolhub/auditevent/?tenant=acme"):
        with CaptureQueriesContext(connection) as queries:
            rows_of(client, url)
        sql = [query["sql"].upper() for query in queries.captured_queries]
        assert not [q for q in sql if "DISTINCT" in q and "AUDITEVENT" in q or "DISTINCT" in q and "TOOLCALL" in q]
        counts = [q for q in sql if "COUNT(" in q and ("TOOLHUB_TOOLCALL" in q or "TOOLHUB_AUDITEVENT" in q)]
        assert counts and all("LIMIT" in q for q in counts), counts
        listed = [q for q in sql if q.startswith('SELECT "TOOLHUB_') and "ORDER BY" in q and "COUNT(" not in q]
        assert listed and all('"DATA"' not in q and '"ARGUMENTS"' not in q for q in listed), listed


@pytest.mark.postgres  # the estimate is PostgreSQL's planner's
def test_a_long_list_is_counted_up_to_a_bound_then_estimated(monkeypatch: pytest.MonkeyPatch, db: None) -> None:
    for _ in range(5):
        make_call("acme")
    monkeypatch.setattr("toolhub.admin_lists.EXACT_COUNT_LIMIT", 3)
    paginator = EstimatedCountPaginator(ToolCall.objects.order_by("-created_at"), 2, estimate=True)
    with CaptureQueriesContext(connection) as queries:
        count = paginator.count
    # past the bound: the planner's estimate (at least what a bounded count found)
    assert count >= 4
    assert any("EXPLAIN" in query["sql"].upper() for query in queries.captured_queries)
    assert not [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper() and "LIMIT" not in q["sql"].upper()]
    assert EstimatedCountPaginator(ToolCall.objects.filter(tenant="nobody"), 2).count == 0


def test_a_tenants_auditor_reads_a_count_of_their_rows_bounded_never_the_estimate(
    monkeypatch: pytest.MonkeyPatch, auditors: Group
) -> None:
    # given acme has 5 calls (2 failed), globex 1 failed one, and lists are counted exactly up to 3 rows
    auditor = member("aud", "acme", auditors)
    for status in [CallStatus.SUCCEEDED] * 3 + [CallStatus.FAILED] * 2:
        make_call("acme", status=status)
    make_call("globex", status=CallStatus.FAILED)
    monkeypatch.setattr("toolhub.admin_lists.EXACT_COUNT_LIMIT", 3)
    client = console(auditor)

    # when acme's auditor opens the calls, acme's failed calls and the events
    with CaptureQueriesContext(connection) as queries:
        calls = rows_of(client, "/admin/toolhub/toolcall/")
        failed = rows_of(client, "/admin/toolhub/toolcall/?status__exact=failed")
        events = rows_of(client, "/admin/toolhub/auditevent/?tenant=acme")

    # then a long list reads "more than 3" and a short one its exact count of acme's rows; the planner is not asked
    assert "more than 3 tool calls" in calls and "more than 3 audit events" in events
    assert "2 tool calls" in failed
    assert not [q for q in queries.captured_queries if "EXPLAIN" in q["sql"].upper()]


@pytest.mark.postgres  # the estimate is PostgreSQL's planner's
def test_only_a_viewer_who_sees_every_tenant_reads_the_planners_estimate(auditors: Group) -> None:
    # given an auditor of acme and a superuser (who sees every tenant)
    auditor = member("aud", "acme", auditors)
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    make_call("acme")

    def explained(user: User) -> bool:
        with CaptureQueriesContext(connection) as queries:
            rows_of(console(user), "/admin/toolhub/toolcall/")
        return any("EXPLAIN" in query["sql"].upper() for query in queries.captured_queries)

    # then only the superuser's list asks the planner (whose estimate counts every tenant's rows)
    assert explained(root) and not explained(auditor)


# --- the call's page: its timeline re-verified ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_calls_page_shows_its_timeline_verified_and_a_tampered_event_not(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    call = make_call("acme")
    client = console(auditor)

    body = rows_of(client, f"/admin/toolhub/toolcall/{call.pk}/change/")
    assert "verified: 2 events, hashes recomputed and chain links checked" in body
    assert SECRET not in body

    event = AuditEvent.objects.filter(call_id=call.pk).order_by("seq").first()
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("UPDATE toolhub_auditevent SET actor = 'someone-else' WHERE id = %s", [event.pk])
    body = rows_of(client, f"/admin/toolhub/toolcall/{call.pk}/change/")
    assert "NOT VERIFIED: 1 of 2 events do not verify" in body
    assert "hash does not match its content: event was altered" in body

    # a deleted event: named by its place, not its sequence number (chains are shared by every tenant)
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM toolhub_auditevent WHERE id = %s", [event.pk])
    body = rows_of(client, f"/admin/toolhub/toolcall/{call.pk}/change/")
    assert "NOT VERIFIED: 1 of 1 events do not verify" in body
    assert "the event before it in its chain is missing" in body and "(seq " not in body


# --- exports -------------------------------------------------------------------------------------------


def test_csv_export_streams_the_filtered_calls_of_ones_tenants_redacted_and_is_audited(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    mine = make_call("acme", agent_name="crm-bot")
    failed = make_call("acme", status=CallStatus.FAILED)
    theirs = make_call("globex")
    unknown = make_call("acme", tool_name="retired_tool", arguments={"token": SECRET})
    client = console(auditor)

    response = client.post("/admin/toolhub/toolcall/export/csv/?status__exact=succeeded")
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    ids = {row["id"] for row in rows}
    assert str(mine.pk) in ids and str(unknown.pk) in ids
    assert str(failed.pk) not in ids and str(theirs.pk) not in ids
    assert SECRET not in text
    row = next(row for row in rows if row["id"] == str(mine.pk))
    assert json.loads(row["arguments"]) == {"customer": "ACME", "api_token": "***redacted***"}
    assert json.loads(next(row for row in rows if row["id"] == str(unknown.pk))["arguments"]) == WITHHELD

    exported = AuditEvent.objects.get(event_type="calls.exported")
    assert exported.actor == "user:aud" and exported.tenant == "acme"
    assert exported.payload["query"] == {"status__exact": "succeeded"} and exported.payload["format"] == "csv"
    assert verify_audit_chains()[1] == []


def test_jsonl_export_and_bad_requests(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    call = make_call("acme", model_call_id="call_x")
    client = console(auditor)

    response = client.post(f"/admin/toolhub/toolcall/export/jsonl/?q={call.pk}")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [line["id"] for line in lines] == [str(call.pk)]
    assert lines[0]["arguments"]["api_token"] == "***redacted***"

    assert client.post("/admin/toolhub/toolcall/export/xml/").status_code == 404
    assert client.post("/admin/toolhub/toolcall/export/csv/?no_such_field=1").status_code == 400
    nobody = User.objects.create_user("nobody", is_staff=True)
    assert console(nobody).post("/admin/toolhub/toolcall/export/csv/").status_code == 403
    assert not AuditEvent.objects.filter(event_type="calls.exported", actor="user:nobody").exists()


def test_an_export_is_recorded_in_the_trail_of_each_tenant_whose_calls_it_holds(auditors: Group) -> None:
    """A staff member of acme and globex exports calls: each tenant's auditors see it in their own trail.

    Found (review y): the export was recorded in the platform's chain whenever the exporter had more than one
    tenant, so acme's auditors never saw that their calls were taken away. Expect: one ``calls.exported`` in the
    chain of each tenant the export holds calls of, naming only that tenant (not the exporter's others, nor a
    tenant filter); a tenant none of whose calls left gets none.
    """
    auditor = member("aud", "acme", auditors)
    Tenant.objects.get_or_create(slug="globex", defaults={"name": "globex"})
    Tenant.objects.get_or_create(slug="initech", defaults={"name": "initech"})
    TenantMembership.objects.create(user=auditor, tenant=Tenant.objects.get(slug="globex"))
    TenantMembership.objects.create(user=auditor, tenant=Tenant.objects.get(slug="initech"))
    make_call("acme")
    make_call("globex")
    make_call("initech", status=CallStatus.FAILED)
    client = console(auditor)

    response = client.post("/admin/toolhub/toolcall/export/jsonl/?status__exact=succeeded")
    assert len(b"".join(response.streaming_content).decode().splitlines()) == 2

    events = AuditEvent.objects.filter(event_type="calls.exported").order_by("tenant")
    assert [(event.tenant, event.payload["tenants"]) for event in events] == [
        ("acme", ["acme"]),
        ("globex", ["globex"]),
    ]
    assert all(event.payload["query"] == {"status__exact": "succeeded"} for event in events)

    # a tenant filter is the tenant's own event, and names no other tenant in it
    client.post("/admin/toolhub/toolcall/export/csv/?tenant=globex")
    newest = AuditEvent.objects.filter(event_type="calls.exported").order_by("-id")[0]
    assert newest.tenant == "globex" and "acme" not in json.dumps(newest.payload)
    assert verify_audit_chains()[1] == []


def test_an_export_is_posted_with_the_csrf_token_so_another_site_cannot_audit_one_in_a_users_name(
    auditors: Group,
) -> None:
    """Each export writes ``calls.exported`` in the user's name: a link or image on another site must not."""
    # given: an auditor logged in, whose browser a third-party page drives
    auditor = member("aud", "acme", auditors)
    make_call("acme")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(auditor)

    # when: that page links, embeds or posts to the export without the console's CSRF token
    fetched = browser.get("/admin/toolhub/toolcall/export/csv/")
    posted = browser.post("/admin/toolhub/toolcall/export/csv/")

    # then: both are refused, and the trail names no export by the auditor
    assert fetched.status_code == 405 and fetched["Allow"] == "POST"
    assert posted.status_code == 403
    assert not AuditEvent.objects.filter(event_type="calls.exported").exists()

    # when: the list's own button posts, with the token of the page
    page = browser.get("/admin/toolhub/toolcall/?status__exact=succeeded")
    token = page.cookies["csrftoken"].value
    assert 'action="/admin/toolhub/toolcall/export/csv/?status__exact=succeeded"' in page.content.decode()
    exported = browser.post(
        "/admin/toolhub/toolcall/export/csv/?status__exact=succeeded", {"csrfmiddlewaretoken": token}
    )

    # then: it exports, audited once with the list's filters
    assert exported.status_code == 200
    assert b"".join(exported.streaming_content).count(b"\n") == 2  # the header and the one call
    event = AuditEvent.objects.get(event_type="calls.exported")
    assert event.payload["query"] == {"status__exact": "succeeded"}


def test_another_tenants_calls_appear_nowhere_in_the_console(auditors: Group) -> None:
    globex_auditor = member("gaud", "globex", auditors)
    theirs = make_call("acme", agent_name="acme-secret-bot", model_call_id="call_acme")
    client = console(globex_auditor)

    for url in (
        "/admin/toolhub/toolcall/",
        f"/admin/toolhub/toolcall/?q={theirs.pk}",
        "/admin/toolhub/toolcall/?tenant=acme",
        "/admin/toolhub/auditevent/",
        f"/admin/toolhub/auditevent/?q={theirs.pk}",
        "/admin/",
    ):
        body = rows_of(client, url)
        # (a searched id is echoed back in the search box; no row, link or filter names the call)
        assert f"{theirs.pk}/change/" not in body and "acme-secret-bot" not in body, url
        assert "call_acme" not in body and '<td class="field-tenant">acme' not in body, url
    assert client.get(f"/admin/toolhub/toolcall/{theirs.pk}/change/").status_code == 302
    export = b"".join(client.post("/admin/toolhub/toolcall/export/jsonl/?tenant=acme").streaming_content)
    assert export == b""
    board = rows_of(client, "/admin/")
    assert '<span class="toolhub-figure-value">0</span>' in board  # acme's call counts nowhere


# --- dashboard ------------------------------------------------------------------------------------------


def test_dashboard_shows_pending_approvals_calls_by_status_and_a_chart(auditors: Group) -> None:
    auditor = member("aud", "acme", auditors)
    make_call("acme", status=CallStatus.PENDING_APPROVAL)
    make_call("acme", status=CallStatus.PENDING_APPROVAL)
    make_call("acme", status=CallStatus.FAILED)
    make_call("globex", status=CallStatus.PENDING_APPROVAL)

    body = rows_of(console(auditor), "/admin/")
    board = body.split('id="toolhub-dashboard"')[1].split("</section>")[0]
    assert '<div class="toolhub-figure" id="dashboard-pending"><span class="toolhub-figure-value">2</span>' in board
    assert '<th scope="row">Failed</th><td>1</td>' in board
    assert '<svg id="calls-per-tool-chart"' in board and "crm_lookup_secure" in board
    assert "approval latency p50 / p95" in board
    assert "Audit trail: never verified" in board


def test_dashboard_is_absent_for_staff_who_may_not_view_calls(db: None) -> None:
    staff = User.objects.create_user("staff", is_staff=True)
    assert 'id="toolhub-dashboard"' not in rows_of(console(staff), "/admin/")


# --- generate_calls and verify_audit -------------------------------------------------------------------


def test_generate_calls_continues_the_chains_and_verify_audit_passes(db: None) -> None:
    make_call("acme")  # real events first: the synthetic ones chain onto them
    calls, events = generate_calls(
        SyntheticSpec(count=300, tools=["crm_lookup_secure", "get_order"], tenants=["acme", "globex"], batch_size=120)
    )

    assert calls == 300 and ToolCall.objects.count() == 301
    assert 2 * 300 <= events <= 5 * 300 and AuditEvent.objects.count() == events + 2
    checked, problems = verify_audit_chains()
    assert (checked, problems) == (events + 2, [])
    assert set(ToolCall.objects.values_list("tenant", flat=True)) == {"acme", "globex"}


def test_generate_calls_command_refuses_bad_input(db: None) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="at least 1"):
        call_command("generate_calls", "0")
    ToolDefinition.objects.all().delete()
    with pytest.raises(CommandError, match="sync_tools"):
        call_command("generate_calls", "5", "--tenants", "acme")
    assert not ToolCall.objects.exists()


def test_generate_calls_is_refused_without_the_demo_and_audited_with_it(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.apps import apps
    from django.core.management.base import CommandError

    installed = apps.is_installed
    monkeypatch.setattr(apps, "is_installed", lambda name: name != "demo" and installed(name))
    with pytest.raises(CommandError, match="never in production"):
        call_command("generate_calls", "5", "--tenants", "acme")
    assert not ToolCall.objects.exists() and not AuditEvent.objects.exists()
    monkeypatch.undo()

    call_command("generate_calls", "3", "--tenants", "acme", stdout=io.StringIO())

    recorded = AuditEvent.objects.get(event_type="audit.synthetic_calls_written")
    assert recorded.actor == "command:generate_calls" and recorded.tenant == "acme"
    assert json.loads(recorded.data)["calls"] == 3


@pytest.mark.django_db(transaction=True)
def test_verify_audit_in_parallel_finds_a_tampered_event_in_any_chain_like_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "console-test-key")
    generate_calls(SyntheticSpec(count=400, tools=["crm_lookup_secure"], tenants=["acme"]))
    call_command("verify_audit", "--no-progress", "--workers", "2", stdout=io.StringIO())
    chains = sorted(set(AuditEvent.objects.values_list("chain", flat=True)))
    assert len(chains) > 2

    for chain in (chains[0], chains[-1]):
        target = AuditEvent.objects.filter(chain=chain).order_by("seq")[5]
        with owner_tampering(), connection.cursor() as cursor:
            cursor.execute("UPDATE toolhub_auditevent SET data = '{\"x\":1}' WHERE id = %s", [target.pk])
    deleted = AuditEvent.objects.filter(chain=chains[1]).order_by("seq")[3]
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM toolhub_auditevent WHERE id = %s", [deleted.pk])
    sequential = verify_audit_chains(workers=1)
    parallel = verify_audit_chains(workers=2)
    assert parallel == sequential
    reasons = {problem.chain: problem.reason for problem in parallel[1]}
    assert set(reasons) == {chains[0], chains[1], chains[-1]}
    assert "event was altered" in reasons[chains[0]] and "event was altered" in reasons[chains[-1]]
    assert reasons[chains[1]] == f"expected seq {deleted.seq}: events are missing"

    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="does not verify"):
        call_command("verify_audit", "--no-progress", "--workers", "2", stdout=io.StringIO(), stderr=io.StringIO())
    from toolhub.models import AuditVerification

    newest, first = AuditVerification.objects.order_by("-finished_at")[:2]
    assert first.ok and not newest.ok and "event was altered" in newest.problems


@pytest.mark.parametrize(
    "columns",
    [
        (0, 1, "call.requested", None, None, "", "", "", "", "{}", ""),
        (
            7,
            99,
            "call.ok",
            uuid.uuid4(),
            uuid.uuid4(),
            'tööl "q"',
            "succeeded",
            "acme",
            "agent:ü\n\t\\",
            '{"a":"é"}',
            "f" * 64,
        ),
        (3, 2, "x", "not-a-uuid-string", None, "t", "s", "", "a", "\u2028\x00", "p"),
        (1, 5, "x", None, None, None, "s", "t", "a", "{}", "p"),  # a None column takes the general path
    ],
)
def test_the_fast_event_hash_equals_the_canonical_json_hash(columns: tuple) -> None:
    import datetime as dt
    import hashlib

    from toolhub.audit_hash import canonical_json, hash_columns

    chain, seq, event_type, call_id, run_id, tool_name, status, tenant, actor, data, prev_hash = columns
    moment = dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.UTC)
    expected = hashlib.sha256(
        canonical_json(
            {
                "chain": chain,
                "seq": seq,
                "event_type": event_type,
                "call_id": str(call_id) if call_id else None,
                "run_id": str(run_id) if run_id else None,
                "tool_name": tool_name,
                "status": status,
                "tenant": tenant,
                "actor": actor,
                "created_at": moment.isoformat(timespec="microseconds"),
                "data": data,
                "prev_hash": prev_hash,
            }
        ).encode()
    ).hexdigest()
    assert (
        hash_columns(chain, seq, event_type, call_id, run_id, tool_name, status, tenant, actor, moment, data, prev_hash)
        == expected
    )


def test_rows_read_as_python_values_elsewhere_take_the_shape_postgresql_gives() -> None:
    import datetime as dt

    from toolhub.exports import EXPORT_COLUMNS, _as_text, export_stream

    moment = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    call_id = uuid.uuid4()
    values = dict.fromkeys(EXPORT_COLUMNS, "")
    values.update(id=call_id, created_at=moment, started_at=None, finished_at=moment, attempts=2, user=None)
    values.update(run_id=None, arguments={"b": "é", "a": [1]})
    row = _as_text(tuple(values[column] for column in EXPORT_COLUMNS))

    assert row[0] == str(call_id) and row[1] == "2026-11-30T12:00:00+00:00" and row[11] == 2
    assert json.loads(row[-1]) == {"b": "é", "a": [1]}
    line = json.loads("".join(export_stream([tuple(row)], "jsonl")))
    assert line["arguments"] == {"b": "é", "a": [1]} and line["user"] is None and line["started_at"] is None
    with pytest.raises(ValueError, match="unknown export format"):
        list(export_stream([], "xml"))


def test_approval_latency_p50_p95_counts_decided_requests_of_ones_tenants(auditors: Group) -> None:
    import datetime as dt

    from django.utils import timezone

    from approvals.dashboard import approval_latency_figures
    from approvals.models import ApprovalRequest, ApprovalStatus

    auditor = member("aud", "acme", auditors)
    now = timezone.now()
    for index, (tenant, wait) in enumerate([("acme", 10), ("acme", 20), ("acme", 30), ("acme", 600), ("globex", 9000)]):
        call = make_call(tenant, status=CallStatus.SUCCEEDED, model_call_id=f"c{index}")
        request = ApprovalRequest.objects.create(
            call=call,
            reason="risk",
            tool_name=call.tool_name,
            tenant=tenant,
            status=ApprovalStatus.APPROVED,
            expires_at=now + dt.timedelta(hours=1),
        )
        ApprovalRequest.objects.filter(pk=request.pk).update(decided_at=request.created_at + dt.timedelta(seconds=wait))

    figures = approval_latency_figures(auditor, now - dt.timedelta(hours=1))

    assert figures == [("approval latency p50 / p95", "20 s / 10 min")]
    assert approval_latency_figures(auditor, now + dt.timedelta(hours=1)) == [("approval latency p50 / p95", "-")]


def test_csv_fields_that_look_like_formulas_are_written_as_text() -> None:
    from toolhub.exports import EXPORT_COLUMNS, export_stream

    row = ["x"] * (len(EXPORT_COLUMNS) - 1) + ["{}"]
    row[6] = '=HYPERLINK("http://evil.example")'
    row[14] = "-1+2"
    parsed = list(csv.reader(io.StringIO("".join(export_stream([tuple(row)], "csv")))))[1]

    assert parsed[6] == '\'=HYPERLINK("http://evil.example")' and parsed[14] == "'-1+2"
    assert parsed[0] == "x" and parsed[-1] == "{}"


def test_generate_calls_command_creates_missing_tenants_and_reports_what_it_wrote(db: None) -> None:
    out = io.StringIO()
    call_command("generate_calls", "50", "--tenants", "acme,newco", "--batch-size", "20", stdout=out)

    assert "Wrote 50 calls and" in out.getvalue()
    assert Tenant.objects.filter(slug="newco").exists()
    assert ToolCall.objects.count() == 50 and verify_audit_chains()[1] == []
