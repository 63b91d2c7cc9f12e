"""Review of 2026-12-05 (cu): review co's lifecycle fixes reviewed again (cascade deletions in the trail, approver
groups protected, retired slugs verified, unknown steps of removed tools held, paused SDK runs read-only).

Each test fails on the reviewed code (main at 9696060) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Deleting a user in the admin deleted their API token with them (``Token.user`` cascades) and the trail did not
   say so: ``GovernanceAudited`` looked the cascaded row's page up by its own model, and tokens are shown (and
   recorded, as ``authtoken.tokenproxy``) through DRF's proxy, so a credential that stopped working was missing from
   the trail exactly when its owner left. Now a cascaded row is recorded by the page that shows its model, directly
   or through a proxy, as that page records a deletion (its tenants, its key redacted).
2. The cascade's recording read every row of every fast-deleted queryset, governed or not, before looking whether a
   page records that model: deleting a user loaded all their idempotency keys (one per direct call) a second time,
   for nothing. Now only the querysets of governed models are read, and each row is recorded once.
3. A deleted tenant's trail was verifiable as its own (co, finding 1) but could not be exported: ``audit_export
   --tenant acme`` (and the console's "Export trail") answered "There is no tenant 'acme'; nothing was exported",
   so acme's auditors could not take away the signed proof of their trail once acme was offboarded. Now the export
   knows the tenants the verification knows (``known_tenant_chains``: living and retired slugs).

Checked and holding (no test here):

- ``SET_NULL`` relations (a decided request's rule, a tool call's or a paused SDK run's user) are updates the
  collector keeps apart (``field_updates``): they are not recorded as deleted. A cascaded row's tenants are read
  before the deletion, in its transaction, so a tenant's grants and memberships name the deleted tenant's chain.
  Django groups several foreign keys of one model to the deleted rows (a grant's ``tenant`` and ``agent_tenant``)
  into one queryset and the collector keeps ``data`` as sets, so no row is reached twice by today's models (and the
  recording now keys rows by primary key anyway). One admin site exists (``ToolhubAdminSite`` as ``admin.site``).
- A protected relation (a tool group's approver group, a pending request's) raises in the recording's collection
  as it would in the deletion, inside the same transaction: nothing is recorded for a refused deletion, and the
  admin's delete page refuses first.
- Approver groups: neither ``toolhub_roles`` nor ``load_demo`` deletes groups (``get_or_create`` only), no tenant
  deletion reaches a group; a request reopened (approved to pending) takes its approver group from the tool groups
  as they are then (``approval_request_create``), and a tool group naming a group concurrently deleted fails the
  deletion's commit on its foreign key, so no reopened request is left without its approvers.
- Retired slugs: the console's "Verify" button queues through ``known_tenant_chains`` too; a new tenant cannot
  take a retired slug, one differing only in case, or one with the same chain base (``Tenant._refuse_another_identity``
  at save); two retired tenants are each verified (a set of slugs).
- Unknown steps of removed tools: ``registry.all()`` reads remote tools through the governance cache (no query per
  tool); holding an unknown step of a removed tool that never had a compensation is the conservative reading, as
  co's docstring says (the call row does not record whether it was compensable).
- ``PausedAgentRun``: read-only admin; deleting its user empties the link (``SET_NULL``), the run stays.
- Held unknown steps and rollbacks: a rollback whose only unknown step's tool left the code now starts (a held
  compensation, the saga ``needs_attention``) where it answered "nothing to roll back". The operator's "Retry (or
  compensate a held step)" on it runs nothing: it fails at once with "Tool 'book' is no longer registered with a
  compensation", the saga still ``needs_attention``; "Resolve by hand" settles it. co's tests pass on PostgreSQL.

Seen, not fixed:

- A large cascade is recorded row by row: one event per row, about 7 queries per cascaded grant on PostgreSQL (2 of
  them the admin's own confirmation summary) and 9 on SQLite; a tenant with 1000 grants deleted in the admin took
  about 9000 queries (2.5-4.5 s on SQLite). Linear, in the deletion's transaction; bounding it needs
  ``governance_append`` to write many rows' events per chain at once (``_append_many``) and their tenants read
  per model, not per row.
- A pending request's ``further_restrictions`` name groups by id in JSON, which no ``on_delete`` sees: such a group
  can be deleted once no tool group names it, and the request then fails closed (no one but a superuser holds a
  group that is gone) until it expires. The "Cannot delete group" page still says the user lacks the permission to
  delete approval requests (co's note): Django's ``get_deleted_objects`` lists a protected row of a model nobody may
  delete that way, for every admin, so the fix belongs in a mixin all admins share, which there is not yet.
"""

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from tests.audit.test_console import make_call
from tests.helpers import console
from toolhub.audit_file_verify import main as verify_file
from toolhub.models import AuditEvent, CallIdempotencyKey, Tenant, TenantMembership

pytestmark = pytest.mark.django_db


def _member_of_acme(name: str) -> User:
    acme, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "acme"})
    user = User.objects.create_user(name, f"{name}@example.com", f"{name}-password")
    TenantMembership.objects.create(user=user, tenant=acme)
    return user


def test_a_users_api_token_taken_by_its_deletion_is_in_the_trail(admin_user: User) -> None:
    """Found: deleting bob in the admin also deleted his API token, and the trail recorded bob and his membership
    only. Expect: a ``governance.deleted`` event for the token in acme's chain, as its own page records one (the
    token proxy's model), its key nowhere in the event."""
    # given bob, of acme, with an API token
    bob = _member_of_acme("bob")
    token = Token.objects.create(user=bob)

    # when a superuser deletes bob in the admin
    response = console(admin_user).post(f"/admin/auth/user/{bob.pk}/delete/", {"post": "yes"})

    # then the token is gone, and the trail says so in acme's chain, without its key
    assert response.status_code == 302 and not Token.objects.exists()
    events = list(AuditEvent.objects.filter(event_type="governance.deleted"))
    recorded = {(event.payload["model"], event.tenant) for event in events}
    assert ("authtoken.tokenproxy", "acme") in recorded
    assert all(token.key not in str(event.payload) for event in events)


def test_rows_no_governance_page_records_are_not_read_by_the_recording(admin_user: User) -> None:
    """Found: deleting bob in the admin read his 300 idempotency keys twice: once for the delete page's summary,
    once more by the cascade's recording, which then found no page recording them. Expect: read once."""
    # given bob with an idempotency key per direct call he made
    bob = _member_of_acme("bob")
    CallIdempotencyKey.objects.bulk_create(
        [CallIdempotencyKey(tenant="acme", user=bob, key=f"k{i}", fingerprint="f") for i in range(300)]
    )

    # when a superuser deletes bob in the admin
    with CaptureQueriesContext(connection) as queries:
        response = console(admin_user).post(f"/admin/auth/user/{bob.pk}/delete/", {"post": "yes"})

    # then the keys went with him, read by the delete page's summary only
    assert response.status_code == 302 and not CallIdempotencyKey.objects.exists()
    reads = [
        q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT") and "callidempotencykey" in q["sql"]
    ]
    assert len(reads) == 1, reads


def test_a_deleted_tenants_trail_is_exported_for_its_auditors(tmp_path: Path) -> None:
    """Found: co made a deleted tenant's trail verifiable as its own, but ``audit_export --tenant acme`` still
    answered "There is no tenant 'acme'; nothing was exported", so acme's auditors could not take away the proof of
    their trail once acme was offboarded. Expect: acme's own chains are exported by its retired slug, and only an
    unknown slug is refused."""
    # given acme with events of its own, then deleted (offboarded); its events stay
    Tenant.objects.create(slug="acme", name="acme")
    for _ in range(2):
        make_call("acme")
    Tenant.objects.filter(slug="acme").delete()
    own = AuditEvent.objects.filter(tenant="acme").count()

    # when acme's trail is exported
    target = tmp_path / "acme.jsonl"
    call_command("audit_export", "--tenant", "acme", "-o", str(target), stdout=io.StringIO(), stderr=io.StringIO())

    # then the file holds acme's events (its export's start recorded too) and verifies offline
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert len([line for line in lines if line.get("tenant") == "acme"]) >= own
    assert verify_file([str(target)]) == 0
    with pytest.raises(Exception, match="no tenant 'nobody'"):
        call_command("audit_export", "--tenant", "nobody", "-o", str(tmp_path / "n.jsonl"), stdout=io.StringIO())
