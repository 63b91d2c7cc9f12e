"""Each tenant's audit events go to chains of its own, which its auditors can verify and read in full."""

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone

from tests.audit.conftest import owner_tampering
from tests.audit.test_console import make_call, member
from tests.mcp.conftest import token
from toolhub import audit_hash_core
from toolhub.audit_console import own_chain_position
from toolhub.audit_hash import TENANT_SHARDS, chain_for, tenant_chains
from toolhub.audit_verify import verify_audit_chains
from toolhub.caller_view import CallerView
from toolhub.models import AuditChainHead, AuditEvent, AuditVerification, Tenant, TenantMembership


@pytest.fixture
def auditors(db: None) -> Group:
    call_command("toolhub_roles", verbosity=0)
    return Group.objects.get(name="auditors")


@pytest.fixture
def two_tenants(db: None) -> None:
    for slug in ("acme", "globex"):
        Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()  # "Verify now" remembers recent requests in the cache


def verify(*arguments: str) -> str:
    out = io.StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", *arguments, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_tenants_events_go_to_its_own_chains_and_the_platforms_below_them(two_tenants: None) -> None:
    calls = {slug: [make_call(slug) for _ in range(12)] for slug in ("acme", "globex", "")}

    chains = {slug: set(AuditEvent.objects.filter(tenant=slug).values_list("chain", flat=True)) for slug in calls}
    assert all(chain in tenant_chains("acme") for chain in chains["acme"])
    assert all(chain in tenant_chains("globex") for chain in chains["globex"])
    assert all(chain < TENANT_SHARDS for chain in chains[""])
    assert not chains["acme"] & chains["globex"] and len(chains["acme"]) > 1  # still sharded by call id
    # every process derives the same chain from the tenant and the call (no lookup, no allocation)
    assert {chain_for(call.id, "acme") for call in calls["acme"]} == chains["acme"]
    assert max(chains["acme"] | chains["globex"]) < 2**53  # exact wherever JSON numbers are doubles
    assert set(AuditChainHead.objects.values_list("chain", flat=True)) == set().union(*chains.values())


def test_verify_audit_for_one_tenant_checks_its_chains_only_and_is_recorded_as_its_own(two_tenants: None) -> None:
    for slug in ("acme", "globex", ""):
        for _ in range(3):
            make_call(slug)

    output = verify("--tenant", "acme")

    acme_events = AuditEvent.objects.filter(tenant="acme").count()
    assert f"acme's chains verified: {acme_events} events, every chain intact" in output
    assert acme_events == 6 and AuditEvent.objects.count() == 18
    recorded = AuditVerification.objects.get()
    assert (recorded.tenant, recorded.ok, recorded.events_checked) == ("acme", True, acme_events)
    assert "Audit trail verified: 18 events" in verify()
    assert AuditVerification.objects.filter(tenant="").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_tampered_event_fails_its_tenants_verification_and_no_other_tenants() -> None:
    for slug in ("acme", "globex"):
        Tenant.objects.create(slug=slug, name=slug)
        for _ in range(3):
            make_call(slug)
    target = AuditEvent.objects.filter(tenant="globex").order_by("id").last()
    assert target is not None
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("UPDATE toolhub_auditevent SET actor = 'someone else' WHERE id = %s", [target.pk])

    assert "every chain intact" in verify("--tenant", "acme")
    with pytest.raises(CommandError, match="does not verify"):
        verify("--tenant", "globex")
    failed = AuditVerification.objects.get(tenant="globex")
    assert not failed.ok and f"event #{target.pk}" in failed.problems and "event was altered" in failed.problems
    assert AuditVerification.objects.get(tenant="acme").ok


@pytest.mark.django_db(transaction=True)
def test_the_whole_trails_run_records_each_tenants_own_result_with_the_checkpoints_problems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for slug in ("acme", "globex", "initech"):  # initech has no events: no record of its own
        Tenant.objects.create(slug=slug, name=slug)
    for slug in ("acme", "acme", "globex", ""):
        make_call(slug)
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "tenant-chains-key")
    call_command("audit_checkpoint", stdout=io.StringIO())
    target = AuditEvent.objects.filter(tenant="globex").order_by("id").last()
    assert target is not None
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("UPDATE toolhub_auditevent SET actor = 'someone else' WHERE id = %s", [target.pk])
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")  # the stored checkpoint can no longer be checked: everyone's problem

    with pytest.raises(CommandError, match="does not verify"):
        verify()

    records = {record.tenant: record for record in AuditVerification.objects.all()}
    assert set(records) == {"", "acme", "globex"}
    assert (records["acme"].events_checked, records["globex"].events_checked, records[""].events_checked) == (4, 2, 8)
    assert f"event #{target.pk}" in records["globex"].problems and f"#{target.pk}" not in records["acme"].problems
    for record in records.values():
        assert not record.ok and "the stored checkpoints cannot be checked" in record.problems


def test_an_unknown_tenant_is_refused_naming_known_ones_and_nothing_is_recorded(two_tenants: None) -> None:
    with pytest.raises(CommandError, match=r"There is no tenant 'acm'; nothing was verified\. Known tenants: acme"):
        verify("--tenant", "acm")
    assert not AuditVerification.objects.exists()


def test_two_tenants_whose_chains_collide_are_told_to_verify_the_whole_trail(
    two_tenants: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40-bit hash of the slug picks a tenant's chains; should two collide, neither sees the other's events."""
    monkeypatch.setattr(audit_hash_core, "tenant_chain_base", lambda tenant: TENANT_SHARDS * 7)
    make_call("acme")
    make_call("globex")

    checked, problems = verify_audit_chains(tenant="acme")

    assert problems and all("holds an event of another tenant" in problem.reason for problem in problems)
    assert all(problem.event_id is None for problem in problems)  # the other tenant's event is not named
    assert verify_audit_chains() == (AuditEvent.objects.count(), [])  # as a whole the trail verifies


def test_a_tenant_stores_its_first_chain_and_a_slug_that_would_share_anothers_chains_is_refused(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = Tenant.objects.create(slug="acme", name="ACME")
    assert acme.audit_chain_base == audit_hash_core.tenant_chain_base("acme") == tenant_chains("acme").start

    monkeypatch.setattr(audit_hash_core, "tenant_chain_base", lambda tenant: acme.audit_chain_base)
    globex = Tenant(slug="globex", name="Globex")
    with pytest.raises(ValidationError, match="audit chains would coincide with another tenant's"):
        globex.full_clean()  # what the admin's form runs: the operator is told, nothing is saved
    with pytest.raises(IntegrityError), transaction.atomic():
        globex.save()  # and the database refuses it whatever the path
    assert list(Tenant.objects.values_list("slug", flat=True)) == ["acme"]


def test_the_console_shows_a_tenants_auditors_their_own_verification_in_full_and_nobody_elses(
    auditors: Group,
) -> None:
    acme_auditor = member("acme-auditor", "acme", auditors)
    globex_auditor = member("globex-auditor", "globex", auditors)
    platform = User.objects.create_superuser("platform", "platform@example.com", "pw")
    make_call("acme")
    make_call("globex")
    verify()
    verify("--tenant", "acme")

    pages = {}
    for user in (acme_auditor, globex_auditor, platform):
        client = Client()
        client.force_login(user)
        response = client.get("/admin/toolhub/toolcall/")
        assert response.status_code == 200
        pages[user.username] = response.content.decode()

    assert 'id="audit-tenant-verification-acme"' in pages["acme-auditor"]
    assert "acme's own chains:" in pages["acme-auditor"] and "(2 events)" in pages["acme-auditor"]
    assert "globex" not in pages["acme-auditor"].split('id="audit-chain-status"')[1]
    # the whole trail's run proved globex's chains too, and that proof is globex's to read in full
    assert "globex's own chains:" in pages["globex-auditor"] and "(2 events)" in pages["globex-auditor"]
    assert "audit-tenant-verification" not in pages["platform"]  # the platform reads the whole trail's figures
    whole = f"{AuditEvent.objects.count()} events"  # both calls' events, and the roles' (toolhub_roles records them)
    assert whole in pages["platform"] and whole not in pages["acme-auditor"]


# --- "Verify now" in the console ------------------------------------------------------------------------


VERIFY_URL = "/admin/toolhub/toolcall/verify/"


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def token_client(user: User) -> Client:
    """The API as a user who is not staff reaches it: with their token (a console session is staff's only)."""
    return Client(HTTP_AUTHORIZATION=f"Token {token(user)}")


def post_verify(user: User, tenant: str, **extra: str) -> HttpResponse:
    return logged_in(user).post(VERIFY_URL, {"tenant": tenant, **extra})


def test_an_auditor_asks_a_worker_to_verify_their_tenants_chains_and_reads_the_result(
    auditors: Group, committed: Callable[..., Any]
) -> None:
    auditor = member("acme-auditor", "acme", auditors)
    make_call("acme")
    make_call("globex")
    client = logged_in(auditor)

    response = committed(client.post, VERIFY_URL, {"tenant": "acme", "next": "/admin/toolhub/auditevent/"})

    assert (response.status_code, response["Location"]) == (302, "/admin/toolhub/auditevent/")
    page = client.get("/admin/toolhub/auditevent/").content.decode()
    assert "A worker is verifying acme&#x27;s own audit chains" in page
    assert "acme's own chains:" in page and "(2 events)" in page  # Celery runs eagerly here
    verification = AuditVerification.objects.get()
    assert (verification.tenant, verification.ok, verification.events_checked) == ("acme", True, 2)

    committed(client.post, VERIFY_URL, {"tenant": "acme"})
    assert "was asked for less than 60 seconds ago" in client.get("/admin/toolhub/toolcall/").content.decode()
    assert AuditVerification.objects.count() == 1  # asked again at once: nothing more was run


def test_verify_now_refuses_other_tenants_unknown_ones_gets_and_staff_without_the_right(
    auditors: Group, two_tenants: None
) -> None:
    auditor = member("acme-auditor", "acme", auditors)
    nobody = User.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
    TenantMembership.objects.create(user=nobody, tenant=Tenant.objects.get(slug="acme"))

    assert post_verify(auditor, "globex").status_code == 404  # another tenant's: as if it did not exist
    assert post_verify(auditor, "").status_code == 404
    assert post_verify(User.objects.create_superuser("root", "r@example.com", "pw"), "nope").status_code == 404
    assert post_verify(nobody, "acme").status_code == 403
    client = logged_in(auditor)
    assert client.get(f"{VERIFY_URL}?tenant=acme").status_code == 405
    external = client.post(VERIFY_URL, {"tenant": "acme", "next": "https://evil.example/"})
    assert external["Location"] == "/admin/toolhub/toolcall/"  # never sent off-site
    assert not AuditVerification.objects.filter(tenant="globex").exists()


def test_a_tenants_staff_read_each_events_place_in_their_own_chains_and_never_in_shared_ones(
    auditors: Group,
) -> None:
    auditor = member("acme-auditor", "acme", auditors)
    platform = User.objects.create_superuser("platform", "platform@example.com", "pw")
    call = make_call("acme")
    event = AuditEvent.objects.filter(call_id=call.pk).order_by("seq").last()
    assert event is not None and event.chain in tenant_chains("acme")
    position = f"{event.chain} · {event.seq}"
    # an acme event from before chains were per tenant sits in a shared chain: its place is not shown
    older = AuditEvent(chain=3, seq=41, tenant="acme")
    foreign = AuditEvent(chain=event.chain, seq=7, tenant="globex")  # never in acme's chains
    assert (own_chain_position(event), own_chain_position(older), own_chain_position(foreign)) == (position, None, None)

    listed = logged_in(auditor).get("/admin/toolhub/auditevent/").content.decode()
    detail = logged_in(auditor).get(f"/admin/toolhub/auditevent/{event.pk}/change/").content.decode()
    assert "column-own_position" in listed and position in listed
    assert "field-own_position" in detail and position in detail
    assert "column-chain" not in listed and "column-seq" not in listed  # shared chains' positions stay hidden
    crossing = logged_in(platform).get("/admin/toolhub/auditevent/").content.decode()
    assert "column-chain" in crossing and "column-own_position" not in crossing

    # a tenant from before chain bases were kept unique might share chains: then no positions for tenant staff
    Tenant.objects.bulk_create([Tenant(slug="older", name="Older")])
    assert "column-own_position" not in logged_in(auditor).get("/admin/toolhub/auditevent/").content.decode()


def test_the_api_gives_a_tenants_staff_each_events_place_in_their_own_chains_as_the_admin_does(
    auditors: Group,
) -> None:
    auditor = member("acme-auditor", "acme", auditors)
    requester = User.objects.create_user("acme-user", "u@example.com", "pw")
    TenantMembership.objects.create(user=requester, tenant=Tenant.objects.get(slug="acme"))
    call = make_call("acme", user=requester)
    stored = list(AuditEvent.objects.filter(call_id=call.pk).order_by("seq").values_list("chain", "seq"))

    staff = logged_in(auditor).get(f"/api/v1/calls/{call.pk}/").json()["audit_events"]
    own = token_client(requester).get(f"/api/v1/calls/{call.pk}/").json()["audit_events"]  # no console: a token

    assert [(event["chain"], event["seq"]) for event in staff] == stored and all(event["hash"] for event in staff)
    # the requester reads neither places nor hashes (no tenant-wide role)
    assert all(event[name] is None for event in own for name in ("chain", "seq", "prev_hash", "hash"))
    # an event of acme's in a shared chain (written before chains were per tenant) keeps its place hidden
    [older] = CallerView(auditor).events(call, [{"chain": 3, "seq": 41, "tenant": "acme", "hash": "h"}])
    assert (older["chain"], older["seq"], older["hash"]) == (None, None, "h")
    # while a tenant from before chain bases were kept unique exists, no place is shown to tenant staff
    Tenant.objects.bulk_create([Tenant(slug="older", name="Older")])
    again = logged_in(auditor).get(f"/api/v1/calls/{call.pk}/").json()["audit_events"]
    assert all(event["chain"] is None and event["seq"] is None for event in again)


def test_verify_audit_for_a_tenant_says_where_its_events_from_before_its_own_chains_are(two_tenants: None) -> None:
    make_call("acme")
    assert "written before its chains were its own" not in verify("--tenant", "acme")
    # an acme event as written before chains were kept per tenant: in a platform chain
    AuditEvent.objects.create(
        chain=3, seq=1, event_type="call.requested", tenant="acme", actor="old", data="{}", created_at=timezone.now()
    )

    output = verify("--tenant", "acme")

    assert "acme's chains verified: 2 events" in output
    assert "Some of acme's events were written before its chains were its own" in output
