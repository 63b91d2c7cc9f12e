"""Review of 2026-12-05 (ct): a fresh-machine smoke test of the README's quick start (``make run``'s steps on the
embedded default: migrate, load_demo, runserver on another port) and the operator's and auditor's flows in
Chromium (Playwright): log in, the approval desk, the sagas' Retry and Resolve by hand through their confirmation
pages, the audit console (Verify now, Export trail, the public key), the password-change page, log out, the
lockout; and ``audit_public_key``, ``audit_export``, ``python -m toolhub.audit_file_verify --public-key-file``.

Each test failed on the reviewed code (main at 1f8d8e8) and passes now.

Findings:

1. A platform auditor who mistyped a tenant in the console's "Export a tenant's trail" box was sent to a bare
   404 page (in production Django's "Not Found", no reason, no way back to the console). The typed box now
   answers on the page it was on: "No tenant named '...'", nothing exported or recorded. A tenant-bound viewer,
   who only has buttons for their own tenants, still gets 404 for any other (nothing told of it).

Checked and holding (in the browser against the running demo, no test here): the demo logins; the approval
desk's page and bulk Approve / Reject (confirmation page, comment), the model reading "Rejected by operator:
<comment>", the API approve with ``round``; the sagas list's and compensations list's Retry and Resolve by hand
through their confirmation pages (marks carried, note recorded); auditors see no actions on the desk, sagas or a
request; Verify now (and its 60-second refusal); Export trail downloads a file that verifies offline, unsigned
without ``TOOLHUB_AUDIT_KEY`` (the console says so, ``audit_public_key`` fails saying so, the verifier reports an
unsigned header with exit 1) and signed with it (the console shows the key and fingerprint, ``audit_public_key``'s
output saved as is is a key file, ``audit_export`` prints the fingerprint, the verifier exits 0 with
``--public-key-file``, hex ``--public-key`` and a signed checkpoint, and refuses ``--key-env`` with exit 2); the
password-change page (mismatch error, change, done page, the new password logs in); log out; five wrong
passwords answer the lockout page (429) and the right one is refused while locked; wrong old passwords on the
password-change page lock it too, its GET then answering 429; ``axes_reset_username`` unlocks; every admin list
of the platform opens for ``admin``; ``/api/docs/`` and ``/api/schema/`` answer 200; the approval e-mails are
printed on the console.
"""

import uuid

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from toolhub.audit import audit_append
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db

EXPORT_URL = "/admin/toolhub/toolcall/export-trail/"


@pytest.fixture
def acme() -> None:
    Tenant.objects.get_or_create(slug="acme", defaults={"name": "acme"})
    audit_append(event_type="call.requested", actor="a", data={}, call_id=uuid.UUID(int=1), tenant="acme")


def test_a_platform_auditor_who_mistypes_a_tenant_is_told_so_on_the_console(acme: None) -> None:
    """Found: the typed "Export a tenant's trail" box answered an unknown tenant with a bare 404 page (production:
    "Not Found", no reason, no way back). Expect: back on the page the box was on, with "No tenant named 'acme2'";
    nothing exported or recorded."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get("/admin/").content.decode()
    assert 'id="audit-export-any"' in page and 'name="next" value="/admin/"' in page

    response = client.post(EXPORT_URL, {"tenant": "acme2", "next": "/admin/"}, follow=True)

    assert response.redirect_chain == [("/admin/", 302)]
    assert "No tenant named &#x27;acme2&#x27;" in response.content.decode()
    assert not AuditEvent.objects.filter(event_type__startswith="audit.export").exists()


def test_the_typed_box_never_sends_a_platform_auditor_off_site(acme: None) -> None:
    """Found: (with finding 1) the box's return address is posted. Expect: another site's address is not followed;
    the audit events' list is the fallback."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))

    response = client.post(EXPORT_URL, {"tenant": "nosuch", "next": "https://evil.example/"})

    assert response.status_code == 302 and response["Location"] == "/admin/toolhub/toolcall/"


def test_a_tenant_bound_viewer_still_gets_404_for_any_other_tenant(acme: None) -> None:
    """Found: (guard for finding 1) the message must not tell a bound viewer which tenants exist. Expect: 404 for
    another tenant and a missing one alike, nothing recorded."""
    Tenant.objects.create(slug="globex", name="globex")
    viewer = User.objects.create_user("bound", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    client = Client()
    client.force_login(viewer)
    for tenant in ("globex", "nosuch"):
        assert client.post(EXPORT_URL, {"tenant": tenant, "next": "/admin/"}).status_code == 404
    assert not AuditEvent.objects.filter(event_type__startswith="audit.export").exists()
